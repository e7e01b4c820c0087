package tablestore.spark.jvm.catalog;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.storage.BlockManagerId;
import scala.jdk.javaapi.CollectionConverters;

import tablestore.spark.jvm.mirror.Contract;

/**
 * Where the log job's tasks run (tablestore/spark/log_publish.py, step 2): each task is asked to run on the executor
 * its bucket maps to (bucket modulo the number of executors, executors in the order of their ids), so that a bucket's
 * tasks of one micro-batch after another find that executor's producer of the bucket's transactional id open.
 * Without this Spark offers the tasks to executors in a shuffled order: a bucket moves, its new executor starts a
 * producer ({@code init_transactions}, about 80 ms on the machines measured) and fences the old one (30 of 48 log
 * tasks in a profiled run of bench/stream_log_bench.py).
 *
 * <p>A preference, not a rule: Spark's delay scheduling runs a task elsewhere when its executor has no free slot
 * within {@code spark.locality.wait}, or at once when that executor is gone; exactly once does not depend on where a
 * task runs (the bucket's transactional id and marker do that). The bucket of each task comes from the plan file
 * (Python writes the list in the order of its input partitions, {@link Contract#LOG_PUBLISH_TASKS_KEY}); when the
 * list and the partitions disagree in number, or there is no executor but the driver, nothing is pinned.
 */
final class LogTaskPlacement {
    private static final ObjectMapper JSON = new ObjectMapper();

    private LogTaskPlacement() {
    }

    /** {@code python}, the Python source's scan of {@code options}; pinned when it is the log job's read. */
    static ScanBuilder of(ScanBuilder python, Map<String, String> options) {
        String planFile = options.get(LogPublish.READ_OPTION);
        if (planFile == null) {
            return python;
        }
        return () -> new PinnedScan(python.build(), planFile);
    }

    /** The bucket of each input partition, in order, from the plan file; null when it cannot be read. */
    static List<Integer> taskBuckets(String planFile) {
        try {
            JsonNode tasks = JSON.readTree(new File(planFile)).path(Contract.LOG_PUBLISH_TASKS_KEY);
            if (!tasks.isArray()) {
                return null;
            }
            List<Integer> buckets = new ArrayList<>();
            tasks.forEach(b -> buckets.add(b.asInt()));
            return buckets;
        } catch (IOException e) {
            return null;
        }
    }

    /** Spark's task locations ({@code executor_<host>_<id>}) of the live executors, the driver's left out, by id. */
    static List<String> executors() {
        List<BlockManagerId> ids = new ArrayList<>(CollectionConverters.asJava(
            SparkEnv.get().blockManager().master().getMemoryStatus().keySet()));
        ids.removeIf(BlockManagerId::isDriver);
        ids.sort(Comparator.comparing((BlockManagerId id) -> id.executorId().length())
            .thenComparing(BlockManagerId::executorId));   // numeric ids in numeric order
        List<String> out = new ArrayList<>();
        ids.forEach(id -> out.add("executor_" + id.host() + "_" + id.executorId()));
        return out;
    }

    /** The location of each of {@code count} tasks whose buckets are {@code buckets}; null: no preference. */
    static String[] locations(List<Integer> buckets, int count, List<String> executors) {
        if (buckets == null || buckets.size() != count || executors.isEmpty()) {
            return null;
        }
        String[] out = new String[count];
        for (int i = 0; i < count; i++) {
            out[i] = executors.get(Math.floorMod(buckets.get(i), executors.size()));
        }
        return out;
    }

    private static final class PinnedScan implements Scan {
        private final Scan python;
        private final String planFile;

        PinnedScan(Scan python, String planFile) {
            this.python = python;
            this.planFile = planFile;
        }

        @Override
        public StructType readSchema() {
            return python.readSchema();
        }

        @Override
        public String description() {
            return python.description();
        }

        @Override
        public CustomMetric[] supportedCustomMetrics() {
            return python.supportedCustomMetrics();
        }

        @Override
        public CustomTaskMetric[] reportDriverMetrics() {
            return python.reportDriverMetrics();
        }

        @Override
        public Batch toBatch() {
            Batch batch = python.toBatch();
            return new Batch() {
                @Override
                public InputPartition[] planInputPartitions() {
                    InputPartition[] parts = batch.planInputPartitions();
                    String[] at = locations(taskBuckets(planFile), parts.length, executors());
                    if (at == null) {
                        return parts;
                    }
                    InputPartition[] pinned = new InputPartition[parts.length];
                    for (int i = 0; i < parts.length; i++) {
                        pinned[i] = new Pinned(parts[i], at[i]);
                    }
                    return pinned;
                }

                @Override
                public PartitionReaderFactory createReaderFactory() {
                    return new Unpinning(batch.createReaderFactory());
                }
            };
        }
    }

    /** A Python input partition with the executor it should run on. */
    static final class Pinned implements InputPartition {
        private static final long serialVersionUID = 1L;
        final InputPartition inner;
        private final String location;

        Pinned(InputPartition inner, String location) {
            this.inner = inner;
            this.location = location;
        }

        @Override
        public String[] preferredLocations() {
            return new String[] {location};
        }
    }

    /** The Python reader factory, given the Python partitions back. */
    private static final class Unpinning implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final PartitionReaderFactory python;

        Unpinning(PartitionReaderFactory python) {
            this.python = python;
        }

        private static InputPartition inner(InputPartition partition) {
            return partition instanceof Pinned ? ((Pinned) partition).inner : partition;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            return python.createReader(inner(partition));
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return python.createColumnarReader(inner(partition));
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return python.supportColumnarReads(inner(partition));
        }
    }
}
