package tablestore.spark.jvm.mirror;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.CRC32;

import org.roaringbitmap.longlong.Roaring64NavigableMap;

/**
 * Python owner: {@code filestore/dvformat.py}. One deletion vector of a Delta deletion-vector file, the rows of a
 * data file that are deleted ({@code read_dv}): at Delta's {@code offset} the size (int32 BE), the serialized vector
 * of {@code size} bytes and its CRC-32 (int32 BE); the vector is the magic 1681511377 (int32 LE) and the portable
 * 64-bit roaring bitmap (int64 LE count of 32-bit buckets, then per bucket its uint32 LE high key and a portable
 * 32-bit RoaringBitmap), which {@link Roaring64NavigableMap#deserializePortable} reads. Like Python, only the
 * portable magic is accepted, and bytes after a complete bitmap go unnoticed (the size and the CRC pin the length).
 */
public final class DeletionVector {
    /** filestore.dvformat.DELTA_DV_MAGIC. */
    public static final int MAGIC = 1681511377;

    private DeletionVector() {
    }

    /** The checked bytes are not a deletion vector: the message (one line) names what is wrong. */
    public static final class FormatException extends IOException {
        public FormatException(String message) {
            super(message);
        }
    }

    /**
     * The positions of the vector whose {@code size + 8} framed bytes (size field, vector, CRC) are {@code framed}
     * (the range a reader reads from {@code offset}: {@code read_dv(data, 0, size)}), size field and CRC checked.
     */
    public static Roaring64NavigableMap decodeFramed(byte[] framed, int size) throws FormatException {
        if (size < 0 || framed.length != (long) size + 8) {
            throw new FormatException("deletion vector range is " + framed.length + " bytes, " + ((long) size + 8)
                + " expected for a vector of " + size);
        }
        ByteBuffer in = ByteBuffer.wrap(framed).order(ByteOrder.BIG_ENDIAN);
        int stored = in.getInt(0);
        if (stored != size) {
            throw new FormatException("deletion vector size field is " + stored + ", descriptor says " + size);
        }
        CRC32 crc = new CRC32();
        crc.update(framed, 4, size);
        long storedCrc = in.getInt(4 + size) & 0xFFFFFFFFL;
        if (storedCrc != crc.getValue()) {
            throw new FormatException(String.format("deletion vector CRC-32 mismatch: stored 0x%08x, computed 0x%08x",
                storedCrc, crc.getValue()));
        }
        return decode(framed, 4, size);
    }

    /** The positions of the serialized vector at {@code framed[from, from + length)} (magic + bitmap). */
    public static Roaring64NavigableMap decode(byte[] data, int from, int length) throws FormatException {
        if (length < 12) {
            throw new FormatException("deletion vector truncated: " + length + " bytes, at least 12 expected");
        }
        int magic = ByteBuffer.wrap(data, from, 4).order(ByteOrder.LITTLE_ENDIAN).getInt();
        if (magic != MAGIC) {
            throw new FormatException("deletion vector has magic number " + magic + ", expected " + MAGIC);
        }
        Roaring64NavigableMap bitmap = new Roaring64NavigableMap();
        try {
            bitmap.deserializePortable(new DataInputStream(new ByteArrayInputStream(data, from + 4, length - 4)));
        } catch (IOException | RuntimeException e) {
            throw new FormatException("deletion vector bitmap is truncated or corrupt (" + length + " bytes): " + e);
        }
        return bitmap;
    }
}
