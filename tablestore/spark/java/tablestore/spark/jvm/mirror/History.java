package tablestore.spark.jvm.mirror;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;

import org.apache.spark.sql.Row;

/**
 * Python owner: {@code tablestore/materializer/multiset.py}. One primary key's history of added rows, loaded once
 * per micro-batch: the sequenced multiset of the Python materializer (the reference semantics) in JVM form. Every
 * operation is O(1) (amortised).
 *
 * <p>Entries sit in arrival order in {@code entries}; a removed entry leaves a null slot, trailing nulls are
 * trimmed at once (so the last slot is always the newest live entry) and leading nulls are skipped by
 * {@code head}. {@code byIdent} maps a row identity (the upsert key, else the whole row) to its live entries,
 * oldest first.
 *
 * <p>Semantics (multiset.py's contract; what is forwarded comes from tablestore/materializer/upsert.py and is the
 * operator's {@code Materializer}'s to do): ADD (+I, +U) replaces in place the entry with the same
 * upsert key, else appends; it is forwarded as +I when the history was empty, else +U. RETRACT (-U, -D) removes
 * the oldest entry with the same identity: history now empty: -D of the retraction as received; the newest
 * entry removed: +U of the entry now newest; an older one: nothing; none matched: nothing, counted as "state
 * cleared". TTL: LEGACY expires the whole history once its last write is older than the TTL; the other
 * strategies drop expired entries from the front.
 */
public final class History {
    /** What {@link #retract} did. */
    public enum Removal { NOT_FOUND, ALL, LAST, OTHER }

    private static final class Entry {
        Row row;
        long ts;
        final Object ident;
        final int pos;

        Entry(Row row, long ts, Object ident, int pos) {
            this.row = row;
            this.ts = ts;
            this.ident = ident;
            this.pos = pos;
        }
    }

    private final int[] identPositions;
    private final boolean upsertKey;
    private final boolean keyTtl;
    private final ArrayList<Entry> entries = new ArrayList<>();
    private final HashMap<Object, ArrayDeque<Entry>> byIdent = new HashMap<>();
    private int head;
    private int size;
    private long written;

    /**
     * @param identPositions the row positions identifying an entry (the upsert key, or every row column)
     * @param upsertKey      whether {@code identPositions} is an upsert key (ADD then replaces in place)
     * @param keyTtl         LEGACY's per-key TTL instead of per-entry TTL
     */
    public History(int[] identPositions, boolean upsertKey, boolean keyTtl) {
        this.identPositions = identPositions.clone();
        this.upsertKey = upsertKey;
        this.keyTtl = keyTtl;
    }

    /** The identity of a row: equal exactly when the key codec's bytes are (boxed Double/Float equality is
     *  by bits: NaN == NaN, -0.0 != 0.0); binary values compare by content. */
    public Object ident(Row row) {
        if (identPositions.length == 1) {
            return identValue(row.get(identPositions[0]));
        }
        Object[] values = new Object[identPositions.length];
        for (int i = 0; i < values.length; i++) {
            values[i] = identValue(row.get(identPositions[i]));
        }
        return Arrays.asList(values);
    }

    private static Object identValue(Object value) {
        return value instanceof byte[] ? ByteBuffer.wrap((byte[]) value) : value;
    }

    public int size() {
        return size;
    }

    public long lastWrite() {
        return written;
    }

    /** Restores the last write time (LEGACY's TTL clock) after {@link #load}. */
    public void setLastWrite(long ts) {
        written = ts;
    }

    /** Appends a stored entry (loading state), oldest first. */
    public void load(Row row, long ts) {
        append(row, ident(row), ts);
    }

    /** ADD: returns the size before. */
    public int add(Row row, long ts) {
        Object id = ident(row);
        int before = size;
        if (upsertKey) {
            ArrayDeque<Entry> same = byIdent.get(id);
            if (same != null) {
                Entry e = same.peekFirst();
                e.row = row;
                e.ts = ts;
                written = ts;
                return before;
            }
        }
        append(row, id, ts);
        written = ts;
        return before;
    }

    private void append(Row row, Object id, long ts) {
        Entry e = new Entry(row, ts, id, entries.size());
        entries.add(e);
        byIdent.computeIfAbsent(id, k -> new ArrayDeque<>(1)).addLast(e);
        size++;
        written = Math.max(written, ts);
    }

    /** RETRACT of {@code row}. */
    public Removal retract(Row row, long ts) {
        Object id = ident(row);
        ArrayDeque<Entry> same = byIdent.get(id);
        if (same == null) {
            return Removal.NOT_FOUND;
        }
        Entry e = same.pollFirst();
        if (same.isEmpty()) {
            byIdent.remove(id);
        }
        if (size == 1) {
            clear();
            return Removal.ALL;
        }
        unlink(e);
        if (keyTtl) {
            written = ts;
        }
        return e.pos >= entries.size() ? Removal.LAST : Removal.OTHER;   // unlink trimmed the tail
    }

    /** The newest live row (the history must not be empty). */
    public Row newest() {
        return entries.get(entries.size() - 1).row;
    }

    private void unlink(Entry e) {
        entries.set(e.pos, null);
        size--;
        int n = entries.size();
        while (n > 0 && entries.get(n - 1) == null) {
            entries.remove(--n);
        }
    }

    private void clear() {
        entries.clear();
        byIdent.clear();
        head = 0;
        size = 0;
    }

    /** Drops what expired at {@code cutoff} (= now - ttl); returns how many entries. */
    public int expire(long cutoff) {
        if (size == 0) {
            return 0;
        }
        if (keyTtl) {
            if (written > cutoff) {
                return 0;
            }
            int n = size;
            clear();
            return n;
        }
        int dropped = 0;
        while (head < entries.size()) {
            Entry e = entries.get(head);
            if (e != null) {
                if (e.ts > cutoff) {
                    break;
                }
                ArrayDeque<Entry> same = byIdent.get(e.ident);
                same.pollFirst();   // the front entry is the oldest of its identity
                if (same.isEmpty()) {
                    byIdent.remove(e.ident);
                }
                entries.set(head, null);
                size--;
                dropped++;
            }
            head++;
        }
        if (size == 0) {
            clear();
        }
        return dropped;
    }

    /** Adds the live entries to {@code rows} and {@code times}, oldest first; returns the newest write time
     *  (everything held has expired once it is older than the TTL). */
    public long save(List<Row> rows, List<Long> times) {
        long newest = written;
        for (int i = head; i < entries.size(); i++) {
            Entry e = entries.get(i);
            if (e != null) {
                rows.add(e.row);
                times.add(e.ts);
                newest = Math.max(newest, e.ts);
            }
        }
        return newest;
    }
}
