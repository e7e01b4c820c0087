package tablestore.spark.jvm.catalog;

import java.util.Locale;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The batch write without the shuffle by bucket: the table option {@code sink.shuffle-by-bucket} = false (or the
 * write's own option) on a table whose writes the JVM writer can write with every task holding rows of any bucket
 * (the catalog service's {@code unshuffled_reason}, tablestore/spark/jvm_write.py, is null: no partition columns,
 * no log, a one-column integer primary key, ...), for rows with exactly the table's columns. Spark then leaves the
 * rows where they are, and each task writes a sorted run into every bucket its rows fall in
 * ({@code write/BucketFanOut.java}); any other write, and every write of a streaming query, is shuffled by bucket
 * as before ({@link BucketClustering}).
 */
final class Unshuffled {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(Unshuffled.class);
    /** The table option, and write option, asking for it (catalog/options.py SINK_SHUFFLE_BY_BUCKET). */
    static final String OPTION = "sink.shuffle-by-bucket";
    /** The value of {@link BucketClustering#TASK_BUCKET_OPTION} telling Python's planning that each task writes
     * every bucket of its rows (tablestore/spark/write.py: it then makes the JVM write plan). */
    static final String TASK_BUCKET = "any";
    /** The local property Spark sets on a streaming query's thread (StreamExecution.QUERY_ID_KEY). */
    private static final String STREAM_QUERY = "sql.streaming.queryId";

    private final boolean shuffle;
    private final String reason;
    private final StructType schema;

    private Unshuffled(boolean shuffle, String reason, StructType schema) {
        this.shuffle = shuffle;
        this.reason = reason;
        this.schema = schema;
    }

    /** What a table's metadata (the catalog service's {@code load_table} answer) says. */
    static Unshuffled of(JsonNode meta) {
        JsonNode reason = meta.path("unshuffled_reason");
        return new Unshuffled(meta.path("shuffle_by_bucket").asBoolean(true),
            reason.isTextual() ? reason.asText() : null, (StructType) DataType.fromJson(meta.path("schema").asText()));
    }

    /**
     * Whether a write of {@code input} with the write options {@code options} into {@code layout}'s table skips
     * the shuffle; a write that asks for it and cannot says why in the driver's log.
     */
    static boolean applies(BucketClustering.Layout layout, StructType input, Map<String, String> options,
                           String table) {
        Unshuffled u = layout.unshuffled;
        if (u == null || shuffles(u, options, table)
                || SparkSession.active().sparkContext().getLocalProperty(STREAM_QUERY) != null) {
            return false;   // a streaming query's writes (foreachBatch's too) keep one writer per bucket
        }
        String why = u.reason != null ? u.reason : u.misfit(input);
        if (why == null && !layout.partitionKeys.isEmpty()) {
            why = "the table has partition columns";
        }
        if (why != null) {
            LOG.warn("table {}: {} is false, but the write is shuffled by bucket: {}", table, OPTION, why);
            return false;
        }
        return true;
    }

    /** Whether the write shuffles by bucket: its own option, else the table's. */
    private static boolean shuffles(Unshuffled u, Map<String, String> options, String table) {
        for (Map.Entry<String, String> e : options.entrySet()) {
            if (e.getKey().equalsIgnoreCase(OPTION)) {
                String v = e.getValue().trim().toLowerCase(Locale.ROOT);
                if (!v.equals("true") && !v.equals("false")) {
                    throw new IllegalArgumentException("table " + table + ": write option " + OPTION
                        + " must be true or false, not '" + e.getValue() + "'");
                }
                return v.equals("true");
            }
        }
        return u.shuffle;
    }

    /** Why the rows are not the table's columns, each of the table's type (null: they are). */
    private String misfit(StructType input) {
        StructField[] table = schema.fields();
        if (input.fields().length != table.length) {
            return "the rows have columns " + input.simpleString() + ", the table " + schema.simpleString();
        }
        boolean caseSensitive = SQLConf.get().caseSensitiveAnalysis();
        for (StructField column : table) {
            StructField found = null;
            for (StructField f : input.fields()) {
                if (caseSensitive ? f.name().equals(column.name())
                        : f.name().equalsIgnoreCase(column.name())) {
                    found = f;
                }
            }
            if (found == null || !found.dataType().sameType(column.dataType())) {
                return "the rows' column " + column.name() + " is " + (found == null ? "missing"
                    : found.dataType().simpleString()) + ", the table's " + column.dataType().simpleString();
            }
        }
        return null;
    }
}
