package tablestore.spark.jvm;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import scala.jdk.javaapi.CollectionConverters;
import org.slf4j.LoggerFactory;

/**
 * The upsert materializer as a Spark stateful operator: {@code groupByKey(primary key)
 * .flatMapGroupsWithState}, state in the query's state store (RocksDB) and checkpoints. Called from Python by
 * {@code tablestore.spark.upsert_materialize}, which validates the options.
 *
 * <p>State, one value per primary key: {@code struct<rows: array<input row>, ts: array<long>, written: long>},
 * the key's history oldest first. Per key and micro-batch: one read, the batch's events run against a
 * {@link History}, one write (or a remove when the history emptied).
 */
public final class UpsertMaterialize {
    private UpsertMaterialize() {
    }

    /**
     * @param df          the changelog: a string column {@code kindColumn} plus the row columns
     * @param primaryKey  the sink's primary key columns (the grouping)
     * @param upsertKey   the upsert key columns, or empty: identify entries by the whole row
     * @param orderBy     a column ordering a key's events within a micro-batch, or null (arrival order)
     * @param keyTtl      LEGACY's per-key TTL (else per-entry)
     * @param ttlMs       state TTL in ms, or 0 for none (then processing-time timeouts drop expired keys)
     * @param update      declare the Update output mode (the query must then write in update mode), else Append
     */
    public static Dataset<Row> apply(Dataset<Row> df, String[] primaryKey, String[] upsertKey, String kindColumn,
                                     String orderBy, boolean keyTtl, long ttlMs, boolean update) {
        StructType schema = df.schema();
        int[] pk = positions(schema, primaryKey);
        StructType keySchema = new StructType();
        for (int p : pk) {
            keySchema = keySchema.add(schema.fields()[p]);
        }
        int kind = schema.fieldIndex(kindColumn);
        int order = orderBy == null ? -1 : schema.fieldIndex(orderBy);
        int[] ident;
        if (upsertKey.length > 0) {
            ident = positions(schema, upsertKey);
        } else {
            ident = new int[schema.length() - 1 - (order >= 0 ? 1 : 0)];
            int j = 0;
            for (int i = 0; i < schema.length(); i++) {
                if (i != kind && i != order) {
                    ident[j++] = i;
                }
            }
        }
        StructType stateSchema = new StructType()
            .add("rows", new ArrayType(schema, false), false)
            .add("ts", new ArrayType(DataTypes.LongType, false), false)
            .add("written", DataTypes.LongType, false);
        Step step = new Step(kind, order, ident, upsertKey.length > 0, keyTtl, ttlMs);
        return df.groupByKey(new KeyOf(pk), Encoders.row(keySchema))
            .flatMapGroupsWithState(step, update ? OutputMode.Update() : OutputMode.Append(), Encoders.row(stateSchema), Encoders.row(schema),
                ttlMs > 0 ? GroupStateTimeout.ProcessingTimeTimeout() : GroupStateTimeout.NoTimeout());
    }

    private static int[] positions(StructType schema, String[] names) {
        int[] out = new int[names.length];
        for (int i = 0; i < names.length; i++) {
            out[i] = schema.fieldIndex(names[i]);
        }
        return out;
    }

    static final class KeyOf implements MapFunction<Row, Row> {
        private static final long serialVersionUID = 1L;
        private final int[] pk;

        KeyOf(int[] pk) {
            this.pk = pk;
        }

        @Override
        public Row call(Row row) {
            Object[] values = new Object[pk.length];
            for (int i = 0; i < pk.length; i++) {
                values[i] = row.get(pk[i]);
            }
            return RowFactory.create(values);
        }
    }

    /** One primary key's micro-batch. */
    static final class Step implements FlatMapGroupsWithStateFunction<Row, Row, Row, Row>, Serializable {
        private static final long serialVersionUID = 1L;
        private static final Logger LOG = LoggerFactory.getLogger(UpsertMaterialize.class);
        private final int kind;
        private final int order;
        private final int[] ident;
        private final boolean upsertKey;
        private final boolean keyTtl;
        private final long ttlMs;

        Step(int kind, int order, int[] ident, boolean upsertKey, boolean keyTtl, long ttlMs) {
            this.kind = kind;
            this.order = order;
            this.ident = ident;
            this.upsertKey = upsertKey;
            this.keyTtl = keyTtl;
            this.ttlMs = ttlMs;
        }

        @Override
        public Iterator<Row> call(Row key, Iterator<Row> events, GroupState<Row> state) {
            if (state.hasTimedOut()) {   // everything the key held expired: drop it, emit nothing
                state.remove();
                return Collections.emptyIterator();
            }
            History history = new History(ident, upsertKey, keyTtl);
            if (state.exists()) {
                Row stored = state.get();
                List<Row> rows = stored.getList(0);
                List<Long> times = stored.getList(1);
                for (int i = 0; i < rows.size(); i++) {
                    history.load(rows.get(i), times.get(i));
                }
                history.setLastWrite(stored.getLong(2));
            }
            List<Row> batch = new ArrayList<>();
            events.forEachRemaining(batch::add);
            if (order >= 0) {
                batch.sort((a, b) -> compareNullsFirst(a.get(order), b.get(order)));
            }
            long now = ttlMs > 0 ? state.getCurrentProcessingTimeMs() : 0L;
            List<Row> out = new ArrayList<>(batch.size());
            for (Row event : batch) {
                process(history, event, now, out, key);
            }
            if (history.size() == 0) {
                if (state.exists()) {
                    state.remove();
                }
            } else {
                List<Row> rows = new ArrayList<>(history.size());
                List<Long> times = new ArrayList<>(history.size());
                history.save(rows, times);
                state.update(RowFactory.create(CollectionConverters.asScala(rows), CollectionConverters.asScala(times),
                                               history.lastWrite()));
                if (ttlMs > 0) {
                    state.setTimeoutDuration(Math.max(1L, history.expiresAt(ttlMs) - now));
                }
            }
            return out.iterator();
        }

        private void process(History history, Row event, long now, List<Row> out, Row key) {
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
                    case NOT_FOUND -> LOG.warn("Not found record to retract (the state is cleared because of "
                        + "state ttl, or the row was never added): key {}, {} {}", key, k, event);
                }
            } else {
                throw new IllegalArgumentException("invalid _row_kind " + k + " for primary key " + key
                    + " (expected +I, -U, +U or -D): " + event);
            }
        }

        @SuppressWarnings({"unchecked", "rawtypes"})
        private static int compareNullsFirst(Object a, Object b) {
            if (a == null || b == null) {
                return a == null ? (b == null ? 0 : -1) : 1;
            }
            return ((Comparable) a).compareTo(b);
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
    }
}
