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
import scala.jdk.javaapi.CollectionConverters;

import tablestore.spark.jvm.mirror.History;

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
        Step step = new Step(new Materializer(kind, order, ident, upsertKey.length > 0, keyTtl, ttlMs));
        OutputMode mode = update ? OutputMode.Update() : OutputMode.Append();
        GroupStateTimeout timeout =
            ttlMs > 0 ? GroupStateTimeout.ProcessingTimeTimeout() : GroupStateTimeout.NoTimeout();
        return df.groupByKey(new KeyOf(pk), Encoders.row(keySchema))
            .flatMapGroupsWithState(step, mode, Encoders.row(stateSchema), Encoders.row(schema), timeout);
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

    /** One primary key's micro-batch: load its history, run the events, store it back. */
    static final class Step implements FlatMapGroupsWithStateFunction<Row, Row, Row, Row>, Serializable {
        private static final long serialVersionUID = 1L;
        private final Materializer materializer;

        Step(Materializer materializer) {
            this.materializer = materializer;
        }

        @Override
        public Iterator<Row> call(Row key, Iterator<Row> events, GroupState<Row> state) {
            if (state.hasTimedOut()) {   // everything the key held expired: drop it, emit nothing
                state.remove();
                return Collections.emptyIterator();
            }
            Materializer m = materializer;
            History history = m.newHistory();
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
            if (m.orderPosition() >= 0) {
                batch.sort(m::compareOrder);
            }
            long ttl = m.ttlMs();
            long now = ttl > 0 ? state.getCurrentProcessingTimeMs() : 0L;
            List<Row> out = new ArrayList<>(batch.size());
            for (Row event : batch) {
                m.process(history, event, now, out);
            }
            if (history.size() == 0) {
                if (state.exists()) {
                    state.remove();
                }
            } else {
                List<Row> rows = new ArrayList<>(history.size());
                List<Long> times = new ArrayList<>(history.size());
                long newest = history.save(rows, times);
                state.update(RowFactory.create(CollectionConverters.asScala(rows), CollectionConverters.asScala(times),
                                               history.lastWrite()));
                if (ttl > 0) {   // the timeout fires once everything held has expired
                    state.setTimeoutDuration(Math.max(1L, newest + ttl - now));
                }
            }
            return out.iterator();
        }
    }
}
