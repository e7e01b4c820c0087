package tablestore.spark.jvm.write;

/**
 * A stable sort of row numbers by a 64-bit signed key: an LSD radix sort, a byte per pass, skipping the bytes in
 * which every key agrees (keys below 2^24 sort in three passes). Stable: rows of one key keep their input order,
 * so the last of them is the newest (the one the file store's merge keeps).
 */
final class KeySort {
    /** Row numbers in key order, and the keys in that order. */
    final int[] rows;
    final long[] keys;

    private KeySort(int[] rows, long[] keys) {
        this.rows = rows;
        this.keys = keys;
    }

    /** The first {@code n} of {@code keys} (row i's key at i), sorted. */
    static KeySort of(long[] keys, int n) {
        return of(keys, 0, n);
    }

    /** {@code keys[from:to]} sorted; the rows are numbered from 0 (row i's key at {@code from + i}). */
    static KeySort of(long[] keys, int from, int to) {
        int n = to - from;
        long[] k = new long[n];
        int[] r = new int[n];
        int[][] counts = new int[8][256];
        for (int i = 0; i < n; i++) {
            long v = keys[from + i] ^ Long.MIN_VALUE;   // signed order as unsigned bytes
            k[i] = v;
            r[i] = i;
            for (int d = 0; d < 8; d++) {
                counts[d][(int) (v >>> (8 * d)) & 0xff]++;
            }
        }
        long[] k2 = new long[n];
        int[] r2 = new int[n];
        for (int d = 0; d < 8 && n > 0; d++) {
            int[] count = counts[d];
            int shift = 8 * d;
            if (count[(int) (k[0] >>> shift) & 0xff] == n) {
                continue;   // every key has this byte
            }
            int[] at = new int[256];
            for (int b = 1; b < 256; b++) {
                at[b] = at[b - 1] + count[b - 1];
            }
            for (int i = 0; i < n; i++) {
                long v = k[i];
                int p = at[(int) (v >>> shift) & 0xff]++;
                k2[p] = v;
                r2[p] = r[i];
            }
            long[] tk = k;
            k = k2;
            k2 = tk;
            int[] tr = r;
            r = r2;
            r2 = tr;
        }
        for (int i = 0; i < n; i++) {
            k[i] ^= Long.MIN_VALUE;
        }
        return new KeySort(r, k);
    }

    /** The positions (in sorted order) of the last row of each key: the winners of a merge of ADD rows. */
    int[] lastOfEachKey() {
        int n = rows.length;
        int[] out = new int[n];
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (i == n - 1 || keys[i] != keys[i + 1]) {
                out[m++] = i;
            }
        }
        return java.util.Arrays.copyOf(out, m);
    }
}
