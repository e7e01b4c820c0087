package tablestore.spark.jvm.catalog;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsDynamicOverwrite;
import org.apache.spark.sql.connector.write.SupportsOverwriteV2;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import tablestore.spark.jvm.PythonSourceBridge;
import tablestore.spark.jvm.write.JvmBatchWrite;

/**
 * The overwrite bridge: the Python writer only knows {@code overwrite: bool}, so this builder records Spark's
 * overwrite mode and hands it to Python as options when the write is built: {@code overwrite-mode} =
 * {@code static} (truncate), {@code dynamic} (the partitions written), or {@code filter} with
 * {@code overwrite-predicate} (JSON, {@link PredicateJson}: the partitions matching it).
 *
 * <p>The write asks Spark for one writer per bucket: rows clustered by the partition columns and the table's bucket
 * ({@link BucketClustering}).
 */
final class ManagedWriteBuilder implements SupportsOverwriteV2, SupportsDynamicOverwrite {
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
        BucketClustering.Layout layout = table.layout();
        extra.putAll(BucketClustering.taskOptions(layout));
        String logPlan = LogPublish.planFile(info);   // the executors produce the log after the commit
        if (logPlan != null) {
            extra.put(LogPublish.PLAN_OPTION, logPlan);
        }
        String planFile = BucketClustering.jvmPlanFile(layout, info.options().asCaseSensitiveMap());
        if (planFile != null) {
            extra.put(JvmBatchWrite.PLAN_OPTION, planFile);
            tablestore.spark.jvm.HadoopFiles.markS3a(extra);
        }
        CaseInsensitiveStringMap options = table.injected(info.options().asCaseSensitiveMap(), extra);
        WriteBuilder python = PythonSourceBridge.writeBuilder(table.schema(), table.partitioning(),
            BucketClustering.withOptions(info, options));
        if (mode != null) {
            python = ((org.apache.spark.sql.connector.write.SupportsTruncate) python).truncate();
        }
        return BucketClustering.clustered(python.build(), layout, mode, table.name(), planFile, info.schema(),
            logPlan, options.asCaseSensitiveMap());
    }
}
