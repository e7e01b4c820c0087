package tablestore.spark.jvm.catalog;

import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsDynamicOverwrite;
import org.apache.spark.sql.connector.write.SupportsOverwriteV2;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import tablestore.spark.jvm.PythonSourceBridge;

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
        BucketClustering.Layout layout = table.layout();
        if (BucketClustering.taskPerBucket(layout)) {
            extra.put(TASK_BUCKET_OPTION, "partition");   // write task p gets exactly bucket p's rows
        }
        CaseInsensitiveStringMap options = table.injected(info.options().asCaseSensitiveMap(), extra);
        WriteBuilder python = PythonSourceBridge.writeBuilder(table.schema(), table.partitioning(),
            new Info(info, options));
        if (mode != null) {
            python = ((org.apache.spark.sql.connector.write.SupportsTruncate) python).truncate();
        }
        return BucketClustering.clustered(python.build(), layout, mode, table.name());
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
}
