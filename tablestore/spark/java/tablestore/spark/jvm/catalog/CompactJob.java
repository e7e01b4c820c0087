package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

import tablestore.spark.jvm.mirror.Contract;

/**
 * {@code CALL managed.system.compact(...)} on the executors (the protocol is tablestore/spark/compact_job.py's):
 * one Spark job reads the {@code managed} source with {@value #READ_OPTION} = the call's arguments, whose planning
 * picks the buckets to compact and whose tasks (one per bucket) rewrite them and return their commit messages; the
 * catalog service then commits them in one COMPACT snapshot. The driver rewrites no data file.
 */
final class CompactJob {
    /** tablestore/spark/compact_job.py's READ_OPTION. */
    static final String READ_OPTION = Contract.COMPACT_READ_OPTION;
    /** Session setting: who compacts (tablestore/spark/compact_job.py's RUNNERS_CONF). */
    static final String RUNNERS_CONF = Contract.COMPACTION_RUNNERS_CONF;

    private static final ObjectMapper JSON = new ObjectMapper();

    private CompactJob() {
    }

    /**
     * Whether the executors compact: {@value #RUNNERS_CONF} = {@code executors}, or {@code auto} (the default)
     * outside a local session, whose executors are the driver's own threads.
     */
    static boolean onExecutors() {
        SparkSession spark = SparkSession.active();
        String runners = spark.conf().get(RUNNERS_CONF, "auto").trim().toLowerCase(java.util.Locale.ROOT);
        switch (runners) {
            case "executors":
                return true;
            case "driver":
                return false;
            case "auto":
                return !spark.sparkContext().isLocal();
            default:
                throw new IllegalArgumentException(RUNNERS_CONF + " must be auto, executors or driver, not '"
                    + runners + "'");
        }
    }

    /** The procedure's result (as the catalog service's {@code compact} gives it) after the executors compacted. */
    static JsonNode run(ManagedCatalog catalog, String table, String partitions, Boolean full) {
        long started = System.nanoTime();
        Map<String, Object> call = new LinkedHashMap<>();
        call.put("full", full == null || full);
        call.put("partitions", partitions);
        Map<String, String> read = new HashMap<>(catalog.sessionOptions());
        read.put("table", table);
        read.put("warehouse", catalog.warehouse());
        try {
            read.put(READ_OPTION, JSON.writeValueAsString(call));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
        Row[] rows = (Row[]) SparkSession.active().read().format("managed").options(read).load().collect();
        List<List<Object>> tasks = new ArrayList<>();
        for (Row row : rows) {
            tasks.add(Arrays.asList(row.get(0), row.get(1), row.get(2), row.get(3)));
        }
        Map<String, Object> args = catalog.args("table", table, "partitions", partitions, "full", full,
            "tasks", tasks, "job_seconds", (System.nanoTime() - started) / 1e9);
        return catalog.call("compact_commit", args);
    }
}
