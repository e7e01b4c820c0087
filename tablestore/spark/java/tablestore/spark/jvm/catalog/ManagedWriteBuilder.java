package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.spark.sql.connector.distributions.Distribution;
import org.apache.spark.sql.connector.distributions.Distributions;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.SortOrder;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.RequiresDistributionAndOrdering;
import org.apache.spark.sql.connector.write.SupportsDynamicOverwrite;
import org.apache.spark.sql.connector.write.SupportsOverwriteV2;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import tablestore.spark.jvm.BucketFunction;
import tablestore.spark.jvm.PythonSourceBridge;
import tablestore.spark.jvm.WriteBatches;

/**
 * The overwrite bridge: the Python writer only knows {@code overwrite: bool}, so this builder records Spark's
 * overwrite mode and hands it to Python as options when the write is built: {@code overwrite-mode} =
 * {@code static} (truncate), {@code dynamic} (the partitions written), or {@code filter} with
 * {@code overwrite-predicate} (JSON, {@link PredicateJson}: the partitions matching it).
 *
 * <p>The write asks Spark for one writer per bucket: rows clustered by the partition columns and the table's bucket
 * (see {@link #clustering()}), strictly: a rebalance (what Spark plans for a distribution not strictly required)
 * may split a skewed bucket over tasks, a repartition only coalesces.
 */
final class ManagedWriteBuilder implements SupportsOverwriteV2, SupportsDynamicOverwrite {
    /**
     * Tells the Python writer (tablestore/spark/write.py, the same constant) that batch write task p receives
     * exactly the rows of bucket p: no partition columns, one task per bucket, the slot function's repartition
     * (REPARTITION_BY_NUM: AQE never coalesces it), so the task need not hash its rows again.
     */
    static final String TASK_BUCKET_OPTION = "__task-bucket";
    private final ManagedTable table;
    private final LogicalWriteInfo info;
    private String mode = null;
    private String predicate = null;

    ManagedWriteBuilder(ManagedTable table, LogicalWriteInfo info) {
        this.table = table;
        this.info = info;
    }

    @Override
    public WriteBuilder truncate() {
        mode = "static";
        return this;
    }

    @Override
    public WriteBuilder overwrite(Predicate[] predicates) {
        if (predicates.length == 1 && "ALWAYS_TRUE".equals(predicates[0].name())) {
            return truncate();
        }
        mode = "filter";
        predicate = PredicateJson.toJson(predicates);
        return this;
    }

    @Override
    public WriteBuilder overwriteDynamicPartitions() {
        mode = "dynamic";
        return this;
    }

    @Override
    public Write build() {
        Map<String, String> extra = new HashMap<>();
        if (mode != null) {
            extra.put("overwrite-mode", mode);
        }
        if (predicate != null) {
            extra.put("overwrite-predicate", predicate);
        }
        Expression[] clustering = clustering();
        boolean slots = table.partitionKeys().isEmpty() && clustering.length > 0;
        int tasks = slots ? tasks() : 0;
        if (slots && tasks == table.buckets()) {
            extra.put(TASK_BUCKET_OPTION, "partition");   // write task p gets exactly bucket p's rows
        }
        CaseInsensitiveStringMap options = table.injected(info.options().asCaseSensitiveMap(), extra);
        WriteBuilder python = PythonSourceBridge.writeBuilder(table.schema(), table.partitioning(),
            new Info(info, options));
        if (mode != null) {
            python = ((org.apache.spark.sql.connector.write.SupportsTruncate) python).truncate();
        }
        return new ClusteredWrite(python.build(), clustering, tasks, mode, table.name());
    }

    /**
     * Partition columns, then the table's bucket of the row ({@link BucketFunction}, the JVM twin of
     * filestore/bucket.py, which {@link ManagedCatalog#loadFunction} resolves by name): all rows of a (partition,
     * bucket) meet in one writer task, so a write leaves one sorted run per bucket. Without partition columns, the
     * bucket's {@link BucketSlotFunction} in {@link #tasks()} tasks, so that buckets do not share a task while
     * another idles. A bucket key without a JVM key encoding (the write itself then fails in Python) clusters by
     * the partition columns alone: still one writer per bucket.
     */
    private Expression[] clustering() {
        List<Expression> out = new ArrayList<>();
        table.partitionKeys().forEach(p -> out.add(Expressions.column(p)));
        String function;
        try {
            function = new BucketFunction(table.bucketKeyTypes(), table.buckets()).name();
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            return out.toArray(new Expression[0]);
        }
        if (table.buckets() > 1) {
            if (out.isEmpty()) {
                function = BucketSlotFunction.name(tasks(), function);
            }
            out.add(Expressions.apply(function,
                table.bucketKey().stream().map(Expressions::column).toArray(Expression[]::new)));
        }
        return out.toArray(new Expression[0]);
    }

    /** The write tasks of a table without partition columns: a bucket each, at most the session's shuffle tasks. */
    private int tasks() {
        return Math.max(1, Math.min(table.buckets(), SQLConf.get().numShufflePartitions()));
    }

    /** LogicalWriteInfo with the injected options. */
    private static final class Info implements LogicalWriteInfo {
        private final LogicalWriteInfo base;
        private final CaseInsensitiveStringMap options;

        Info(LogicalWriteInfo base, CaseInsensitiveStringMap options) {
            this.base = base;
            this.options = options;
        }

        @Override
        public CaseInsensitiveStringMap options() {
            return options;
        }

        @Override
        public String queryId() {
            return base.queryId();
        }

        @Override
        public StructType schema() {
            return base.schema();
        }

        @Override
        public Optional<StructType> rowIdSchema() {
            return base.rowIdSchema();
        }

        @Override
        public Optional<StructType> metadataSchema() {
            return base.metadataSchema();
        }
    }

    /** The Python write, with the distribution Spark must give it. */
    private static final class ClusteredWrite implements RequiresDistributionAndOrdering {
        private final Write python;
        private final Expression[] clustering;
        private final int tasks;
        private final String mode;
        private final String table;

        ClusteredWrite(Write python, Expression[] clustering, int tasks, String mode, String table) {
            this.python = python;
            this.clustering = clustering;
            this.tasks = tasks;
            this.mode = mode;
            this.table = table;
        }

        @Override
        public Distribution requiredDistribution() {
            return clustering.length == 0 ? Distributions.unspecified() : Distributions.clustered(clustering);
        }

        @Override
        public int requiredNumPartitions() {
            return tasks;   // 0: Spark's choice; a slot function's count otherwise (see BucketSlotFunction)
        }

        @Override
        public boolean distributionStrictlyRequired() {
            return true;   // a repartition, which AQE may coalesce but never split (a rebalance splits skew)
        }

        @Override
        public SortOrder[] requiredOrdering() {
            return new SortOrder[0];
        }

        @Override
        public String description() {
            return python.description();
        }

        @Override
        public BatchWrite toBatch() {
            return WriteBatches.of(python.toBatch());   // larger Arrow batches into the Python writer
        }

        @Override
        public StreamingWrite toStreaming() {
            if (mode != null) {
                throw Errors.unchecked(new PythonServiceException("SparkWriteError", "table " + table
                    + ": a streaming write appends; overwriting (INSERT OVERWRITE, output mode complete) on an "
                    + "unbounded stream is not supported"));
            }
            return python.toStreaming();
        }

        @Override
        public CustomMetric[] supportedCustomMetrics() {
            return python.supportedCustomMetrics();
        }

        @Override
        public CustomTaskMetric[] reportDriverMetrics() {
            return python.reportDriverMetrics();
        }
    }
}
