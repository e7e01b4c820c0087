package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.connector.distributions.Distribution;
import org.apache.spark.sql.connector.distributions.Distributions;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.SortOrder;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.RequiresDistributionAndOrdering;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import tablestore.spark.jvm.mirror.BucketFunction;
import tablestore.spark.jvm.BucketFunctionCatalog;
import tablestore.spark.jvm.TaskErrors;
import tablestore.spark.jvm.WriteBatches;
import tablestore.spark.jvm.write.JvmBatchWrite;
import tablestore.spark.jvm.mirror.Contract;

/**
 * One writer per bucket (FLIP-188) for the writes Spark plans: the write asks Spark for its rows clustered by the
 * partition columns and the table's bucket ({@link BucketFunction}, the JVM twin of filestore/bucket.py), strictly
 * (a rebalance, what Spark plans for a distribution not strictly required, may split a skewed bucket over tasks; a
 * repartition only coalesces). All rows of a (partition, bucket) then meet in one writer task, in input order, so
 * a write leaves one sorted run per bucket and a key's rows apply in the order they came.
 *
 * <p>Spark resolves the bucket function through the catalog of the written relation, which must be a
 * {@code FunctionCatalog} answering {@link #loadFunction}: the SQL catalog ({@link ManagedCatalog}) and the
 * {@code managed} data source's own catalog ({@code tablestore.spark.jvm.provider.ProviderCatalog}).
 */
public final class BucketClustering {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(BucketClustering.class);

    private BucketClustering() {
    }

    /**
     * Tells the Python writer (tablestore/spark/write.py, the same constant) that batch write task p receives
     * exactly the rows of bucket p: no partition columns, one task per bucket, the slot function's repartition
     * (REPARTITION_BY_NUM: AQE never coalesces it), so the task need not hash its rows again.
     */
    static final String TASK_BUCKET_OPTION = Contract.TASK_BUCKET_OPTION;

    /** What a table's writes cluster by: its partition columns and its bucket key, types and count. */
    public static final class Layout {
        final List<String> partitionKeys;
        final List<String> bucketKey;
        final List<String> bucketKeyTypes;
        final int buckets;
        /** The bucket key's columns are primary-key columns, in which every writer refuses a null. */
        final boolean primaryKey;
        /** The write without the shuffle by bucket ({@link Unshuffled}); null: a table the JVM did not load. */
        final Unshuffled unshuffled;

        public Layout(List<String> partitionKeys, List<String> bucketKey, List<String> bucketKeyTypes, int buckets) {
            this(partitionKeys, bucketKey, bucketKeyTypes, buckets, false, null);
        }

        public Layout(List<String> partitionKeys, List<String> bucketKey, List<String> bucketKeyTypes, int buckets,
                      boolean primaryKey, Unshuffled unshuffled) {
            this.partitionKeys = List.copyOf(partitionKeys);
            this.bucketKey = List.copyOf(bucketKey);
            this.bucketKeyTypes = List.copyOf(bucketKeyTypes);
            this.buckets = buckets;
            this.primaryKey = primaryKey;
            this.unshuffled = unshuffled;
        }

        /** The layout in a table's metadata (the catalog service's {@code load_table} answer). */
        static Layout of(JsonNode meta) {
            List<String> partitionKeys = new ArrayList<>();
            List<String> bucketKey = new ArrayList<>();
            List<String> bucketKeyTypes = new ArrayList<>();
            meta.path("partition_keys").forEach(n -> partitionKeys.add(n.asText()));
            meta.path("bucket_key").forEach(n -> bucketKey.add(n.asText()));
            meta.path("bucket_key_types").forEach(n -> bucketKeyTypes.add(n.asText()));
            List<String> primaryKey = new ArrayList<>();
            meta.path("primary_key").forEach(n -> primaryKey.add(n.asText()));
            return new Layout(partitionKeys, bucketKey, bucketKeyTypes, meta.path("bucket").asInt(1),
                inPrimaryKey(bucketKey, primaryKey), Unshuffled.of(meta));
        }

        /** Whether every column of {@code bucketKey} is one of {@code primaryKey}'s (every writer refuses a null). */
        static boolean inPrimaryKey(List<String> bucketKey, List<String> primaryKey) {
            return !primaryKey.isEmpty() && primaryKey.containsAll(bucketKey);
        }
    }

    /**
     * The warehouse of a read or write with {@code options}: the {@code warehouse} option (any case), else the
     * environment's {@code TABLESTORE_WAREHOUSE}, as the Python source resolves it; null when neither is set.
     */
    public static String warehouse(Map<String, String> options) {
        for (Map.Entry<String, String> e : options.entrySet()) {
            if (e.getKey().equalsIgnoreCase("warehouse")) {
                return e.getValue();
            }
        }
        return System.getenv("TABLESTORE_WAREHOUSE");
    }

    /** A bucket function or slot function ({@link BucketSlotFunction}) a clustered write names, or null. */
    public static UnboundFunction loadFunction(Identifier ident) {
        UnboundFunction function = ident.namespace().length == 0 ? BucketSlotFunction.fromName(ident.name()) : null;
        return function != null ? function : BucketFunctionCatalog.load(ident);
    }

    /**
     * Partition columns, then the table's bucket of the row ({@link BucketFunction}, which {@link #loadFunction}
     * resolves by name): all rows of a (partition, bucket) meet in one writer task. Without partition columns, the
     * bucket's {@link BucketSlotFunction} in {@link #tasks} tasks, so that buckets do not share a task while
     * another idles; a table of one bucket too, so that its rows meet in one writer task after a shuffle, as any
     * other table's (the JVM writer's condition, {@link #taskPerBucket}), never in the tasks that computed them: a
     * Python writer fed by a Python input in one task (a DataFrame of {@code createDataFrame(list)}) is what hung
     * on PySpark 4.1 (docs/design-spark.md). A bucket key without a JVM key encoding (the write itself then fails in
     * Python) clusters by the partition columns alone: still one writer per bucket.
     */
    static Expression[] clustering(Layout layout) {
        List<Expression> out = new ArrayList<>();
        layout.partitionKeys.forEach(p -> out.add(Expressions.column(p)));
        String function;
        try {
            function = new BucketFunction(layout.bucketKeyTypes, layout.buckets).name();
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            return out.toArray(new Expression[0]);
        }
        if (layout.buckets > 1 || out.isEmpty()) {   // one bucket, no partition columns: one task of its own
            if (out.isEmpty()) {
                function = BucketSlotFunction.name(tasks(layout), function, layout.primaryKey);
            }
            out.add(Expressions.apply(function,
                layout.bucketKey.stream().map(Expressions::column).toArray(Expression[]::new)));
        }
        return out.toArray(new Expression[0]);
    }

    /** The write tasks of a table without partition columns: a bucket each, at most the session's shuffle tasks. */
    static int tasks(Layout layout) {
        return Math.max(1, Math.min(layout.buckets, SQLConf.get().numShufflePartitions()));
    }

    /**
     * Whether write task p receives exactly bucket p's rows: no partition columns, one task per bucket (the slot
     * function's repartition to {@link #tasks} partitions, which AQE never coalesces).
     */
    static boolean taskPerBucket(Layout layout) {
        return layout.partitionKeys.isEmpty() && clustering(layout).length > 0 && tasks(layout) == layout.buckets;
    }

    /** The options telling the Python writer what the clustering of {@code layout} gives each task. */
    static Map<String, String> taskOptions(Layout layout) {
        return taskPerBucket(layout) ? Map.of(TASK_BUCKET_OPTION, "partition") : Map.of();
    }

    /** {@code info} with {@code options} instead of its own. */
    static LogicalWriteInfo withOptions(LogicalWriteInfo info, CaseInsensitiveStringMap options) {
        return new Info(info, options);
    }

    /**
     * {@code python} with the distribution of {@code layout}; {@code mode} (null: append) is the overwrite mode,
     * which a streaming write refuses. Its batch is written by the JVM writer where the plan Python writes to
     * {@code planFile} allows ({@link JvmBatchWrite}; null: Python's); {@code input}: the rows. {@code logPlan}
     * (null: none): the file {@code python}'s options name for its commit's log plans ({@link LogPublish}),
     * published after each commit with the write's {@code options}. {@code unshuffled}: the rows are not shuffled
     * by bucket ({@link Unshuffled#applies}), each JVM writer task writing every bucket of its rows.
     */
    static Write clustered(Write python, Layout layout, String mode, String table, String planFile,
                           StructType input, String logPlan, Map<String, String> options, boolean unshuffled) {
        Expression[] clustering = unshuffled ? new Expression[0] : clustering(layout);
        boolean slots = layout.partitionKeys.isEmpty() && clustering.length > 0;
        BucketFunction fanOut = unshuffled ? new BucketFunction(layout.bucketKeyTypes, layout.buckets) : null;
        return new ClusteredWrite(python, clustering, slots ? tasks(layout) : 0, mode, table, planFile, input,
            logPlan, options, fanOut);
    }

    /**
     * The JVM write plan file for a write with {@code options} into {@code layout} (added to the Python write's
     * options as {@link JvmBatchWrite#PLAN_OPTION}), or null: only a write Spark clusters one bucket per task
     * ({@link #taskPerBucket}) can be the JVM writer's, and the write option {@code jvm-writer=false} turns it off.
     */
    static String jvmPlanFile(Layout layout, Map<String, String> options) {
        return taskPerBucket(layout) ? JvmBatchWrite.planFile(options) : null;
    }

    /**
     * Whether Spark can cluster rows of {@code input} by {@code layout}: every column it names is there, and the
     * key columns have the Spark types of the table's key types (a DataFrame written as it is, e.g. an int column
     * into a bigint key, which the Python writer casts, cannot be bucketed before that cast).
     */
    static boolean clusters(Layout layout, StructType input) {
        for (String column : layout.partitionKeys) {
            if (field(input, column) == null) {
                return false;
            }
        }
        if (layout.buckets <= 1 && !layout.partitionKeys.isEmpty()) {
            return true;
        }
        List<StructField> key = new ArrayList<>();
        for (String column : layout.bucketKey) {
            StructField f = field(input, column);
            if (f == null) {
                return false;
            }
            key.add(f);
        }
        try {
            new BucketFunction(layout.bucketKeyTypes, layout.buckets).bind(DataTypes.createStructType(key));
            return true;
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            return false;
        }
    }

    private static StructField field(StructType schema, String name) {
        boolean caseSensitive = SQLConf.get().caseSensitiveAnalysis();
        for (StructField f : schema.fields()) {
            if (caseSensitive ? f.name().equals(name) : f.name().toLowerCase(Locale.ROOT)
                    .equals(name.toLowerCase(Locale.ROOT))) {
                return f;
            }
        }
        return null;
    }

    /**
     * The layout of the table a {@code managed} data source write names ({@code df.write.format("managed")}: the
     * write's options {@code path}/{@code table}, {@code warehouse} or the environment's {@code TABLESTORE_WAREHOUSE},
     * {@code table-storage.*}, {@code s3.*}), loaded from the catalog service when the write is built; null when it
     * cannot be (no such table, no warehouse: the Python write alone then reports the error).
     */
    static Layout load(Map<String, String> options) {
        String table = options.getOrDefault("path", options.get("table"));
        String warehouse = warehouse(options);
        if (table == null || warehouse == null || table.split("\\.").length != 2) {
            return null;
        }
        Map<String, String> session = new java.util.LinkedHashMap<>();
        options.forEach((k, v) -> {
            if (k.startsWith(ManagedCatalog.SESSION_PREFIX) || k.startsWith(ManagedCatalog.CATALOG_OPTION_PREFIX)) {
                session.put(k, v);
            }
        });
        try {
            Map<String, Object> args = new java.util.LinkedHashMap<>();
            args.put("warehouse", warehouse);
            args.put("options", session);
            args.put("table", List.of(table.split("\\.")));
            return Layout.of(PythonService.call("load_table", args));
        } catch (PythonServiceException e) {   // no such table: Python's write reports it
            if (e.type().equals("CatalogServiceError")) {
                LOG.warn("table {}: written without one writer per bucket: {}", table, e.getMessage());
            }
            return null;
        }
    }

    /** The Python write, with the distribution Spark must give it. */
    private static final class ClusteredWrite implements RequiresDistributionAndOrdering {
        private final Write python;
        private final Expression[] clustering;
        private final int tasks;
        private final String mode;
        private final String table;
        private final String planFile;
        private final StructType input;
        private final String logPlan;
        private final Map<String, String> options;
        private final BucketFunction fanOut;

        ClusteredWrite(Write python, Expression[] clustering, int tasks, String mode, String table, String planFile,
                       StructType input, String logPlan, Map<String, String> options, BucketFunction fanOut) {
            this.python = python;
            this.clustering = clustering;
            this.tasks = tasks;
            this.mode = mode;
            this.table = table;
            this.planFile = planFile;
            this.input = input;
            this.logPlan = logPlan;
            this.options = options;
            this.fanOut = fanOut;
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
            // larger Arrow batches into the Python writer; the JVM writer where it applies
            BatchWrite batch = JvmBatchWrite.of(WriteBatches.of(python.toBatch()), planFile, input, table, fanOut);
            return logPlan == null ? batch : LogPublish.batch(batch, logPlan, options);
        }

        @Override
        public StreamingWrite toStreaming() {
            if (mode != null) {
                throw Errors.unchecked(new PythonServiceException("SparkWriteError", "table " + table
                    + ": a streaming write appends; overwriting (INSERT OVERWRITE, output mode complete) on an "
                    + "unbounded stream is not supported"));
            }
            StreamingWrite streaming = TaskErrors.streaming(python.toStreaming());   // a task's error as its line
            return logPlan == null ? streaming : LogPublish.streaming(streaming, logPlan, options);
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

    /** LogicalWriteInfo with other options. */
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
}
