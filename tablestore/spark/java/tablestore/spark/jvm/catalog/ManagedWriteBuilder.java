package tablestore.spark.jvm.catalog;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsDynamicOverwrite;
import org.apache.spark.sql.connector.write.SupportsOverwriteV2;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import tablestore.spark.jvm.HadoopFiles;
import tablestore.spark.jvm.TaskErrors;
import tablestore.spark.jvm.write.JvmBatchWrite;

/**
 * The overwrite bridge: the Python writer only knows {@code overwrite: bool}, so this builder records Spark's
 * overwrite mode and hands it to Python as options when the write is built: {@code overwrite-mode} =
 * {@code static} (truncate), {@code dynamic} (the partitions written), or {@code filter} with
 * {@code overwrite-predicate} (JSON, {@link PredicateJson}: the partitions matching it).
 *
 * <p>The write asks Spark for one writer per bucket: rows clustered by the partition columns and the table's bucket
 * ({@link BucketClustering}), where the table's catalog lets Spark resolve the bucket function (the SQL catalog, the
 * data source's own catalog: {@link ManagedTable}). The same builder serves both front doors.
 */
final class ManagedWriteBuilder implements SupportsOverwriteV2, SupportsDynamicOverwrite {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(ManagedWriteBuilder.class);
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
        if (mode != null && !mode.equals("static")) {   // a truncate: Python's default, or the write's own option
            extra.put("overwrite-mode", mode);          // (df.write's mode("overwrite") always truncates)
        }
        if (predicate != null) {
            extra.put("overwrite-predicate", predicate);
        }
        String logPlan = LogPublish.planFile(info);   // the executors produce the log after the commit
        if (logPlan != null) {
            extra.put(LogPublish.PLAN_OPTION, logPlan);
        }
        BucketClustering.Layout layout = layout();
        String label = table.catalog() != null ? table.name() : table.tableName();
        Map<String, String> asked = info.options().asCaseSensitiveMap();
        String planFile = null;
        boolean unshuffled = false;
        if (layout != null) {
            if (Unshuffled.applies(layout, info.schema(), asked, label)) {
                planFile = JvmBatchWrite.planFile(asked);
                unshuffled = planFile != null;   // not with jvm-writer = false: Python's writer then, shuffled
                if (unshuffled) {
                    extra.put(BucketClustering.TASK_BUCKET_OPTION, Unshuffled.TASK_BUCKET);   // the plan is for it
                }
            }
            if (!unshuffled) {
                extra.putAll(BucketClustering.taskOptions(layout));   // the Python write knows what each task holds
                planFile = BucketClustering.jvmPlanFile(layout, asked);
            }
            if (planFile != null) {
                extra.put(JvmBatchWrite.PLAN_OPTION, planFile);
                HadoopFiles.markS3a(extra);
            }
        }
        CaseInsensitiveStringMap options = table.injected(info.options().asCaseSensitiveMap(), extra);
        LogicalWriteInfo pythonInfo = BucketClustering.withOptions(info, options);
        WriteBuilder python = table.pythonWrite(pythonInfo);
        if (mode != null) {
            python = ((SupportsTruncate) python).truncate();
        }
        Write write = ServiceCommit.write(python.build(), pythonInfo);   // committed by the service
        if (layout == null) {   // Python's write alone; its tasks' errors reach the driver as their line
            return TaskErrors.write(logPlan == null ? write
                : LogPublish.write(write, logPlan, options.asCaseSensitiveMap()));
        }
        return BucketClustering.clustered(write, layout, mode, label, planFile, info.schema(), logPlan,
            options.asCaseSensitiveMap(), unshuffled);
    }

    /**
     * What the write clusters by: the table's layout (a data source write's loaded now), null when Spark cannot
     * cluster it (no function catalog: a data source's streaming write), it cannot be loaded, or the rows do not fit
     * it ({@link BucketClustering#clusters}: a data source write takes a DataFrame as it is).
     */
    private BucketClustering.Layout layout() {
        if (!table.clusteredWrites()) {
            return null;
        }
        BucketClustering.Layout layout = table.layout() != null ? table.layout()
            : BucketClustering.load(info.options().asCaseSensitiveMap());
        if (layout != null && !BucketClustering.clusters(layout, info.schema())) {
            LOG.warn("table {}: written without one writer per bucket: the rows ({}) lack a partition or key "
                + "column, or a key column {} is not of the table's type {} (cast it)", table.tableName(),
                info.schema().simpleString(), layout.bucketKey, layout.bucketKeyTypes);
            return null;
        }
        return layout;
    }
}
