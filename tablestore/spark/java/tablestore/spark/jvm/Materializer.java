package tablestore.spark.jvm;

import java.io.Serializable;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import tablestore.spark.jvm.mirror.History;

/**
 * One event against one primary key's {@link History}: the row kinds, what is emitted, TTL. No Spark state
 * here, so a test drives it directly (tests/tablestore/spark/test_spark_jvm_differential.py).
 */
public final class Materializer implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(Materializer.class);

    private final int kind;
    private final int order;
    private final int[] ident;
    private final boolean upsertKey;
    private final boolean keyTtl;
    private final long ttlMs;

    /**
     * @param kind      position of the row-kind column
     * @param order     position of the order column (its output value is the triggering event's), or -1
     * @param ident     positions identifying an entry: the upsert key, or every row column
     * @param upsertKey whether {@code ident} is an upsert key
     * @param keyTtl    LEGACY's per-key TTL
     * @param ttlMs     TTL in ms, 0 for none
     */
    public Materializer(int kind, int order, int[] ident, boolean upsertKey, boolean keyTtl, long ttlMs) {
        this.kind = kind;
        this.order = order;
        this.ident = ident.clone();
        this.upsertKey = upsertKey;
        this.keyTtl = keyTtl;
        this.ttlMs = ttlMs;
    }

    public int orderPosition() {
        return order;
    }

    public long ttlMs() {
        return ttlMs;
    }

    /** An empty history for one primary key. */
    public History newHistory() {
        return new History(ident, upsertKey, keyTtl);
    }

    /** Processes one event at time {@code now}, appending what it emits to {@code out}. */
    public void process(History history, Row event, long now, List<Row> out) {
        Object k = event.get(kind);
        if (ttlMs > 0) {
            history.expire(now - ttlMs);
        }
        if ("+I".equals(k) || "+U".equals(k)) {
            int before = history.add(event, now);
            out.add(emit(event, before == 0 ? "+I" : "+U", event));
        } else if ("-U".equals(k) || "-D".equals(k)) {
            switch (history.retract(event, now)) {
                case ALL -> out.add(emit(event, "-D", event));
                case LAST -> out.add(emit(history.newest(), "+U", event));
                case OTHER -> { }
                case NOT_FOUND -> LOG.warn("Not found record to retract (the state is cleared because of state "
                    + "ttl, or the row was never added): {} {}", k, event);
            }
        } else {
            throw new IllegalArgumentException("invalid _row_kind " + k + " (expected +I, -U, +U or -D) in " + event);
        }
    }

    /** {@code row} with the emitted kind, and the triggering event's order value. */
    private Row emit(Row row, String emittedKind, Row trigger) {
        Object[] values = new Object[row.length()];
        for (int i = 0; i < values.length; i++) {
            values[i] = row.get(i);
        }
        values[kind] = emittedKind;
        if (order >= 0) {
            values[order] = trigger.get(order);
        }
        return RowFactory.create(values);
    }

    /** Orders events by the order column, nulls first. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public int compareOrder(Row a, Row b) {
        Object x = a.get(order);
        Object y = b.get(order);
        if (x == null || y == null) {
            return x == null ? (y == null ? 0 : -1) : 1;
        }
        return ((Comparable) x).compareTo(y);
    }
}
