package tablestore.spark.jvm.provider;

import java.io.File;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.streaming.ContinuousStream;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.parquet.VectorizedParquetRecordReader;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import tablestore.spark.jvm.catalog.BucketClustering;
import tablestore.spark.jvm.catalog.LogPublish;
import tablestore.spark.jvm.read.RawSplits;
import tablestore.spark.jvm.read.RawSplits.RawPlan;
import tablestore.spark.jvm.HadoopFiles;

/**
 * The Python source's table with one addition to its batch scans: splits that need no merge are read by Spark's
 * own vectorized Parquet reader instead of through a Python worker (Paimon's raw-convertible splits).
 *
 * <p>Protocol (tablestore/spark/read.py, step 4): the scan options carry {@value RawSplits#RAW_PLAN_OPTION} = a file path
 * of this JVM's; the Python reader's {@code partitions()} (run by the Python batch's planning) writes there which
 * splits it left out, as JSON {@code {"python_partitions": n, "columns": [...], "raw": [[file, ...], ...]}}; the
 * batch returns the Python partitions (none when n is 0: Python returns a placeholder for an empty plan) followed
 * by one {@link RawSplit} per raw split. Python's plan is cached per table object (as Spark's Python batch caches
 * its partitions), so is this. Without the file (another Python) every split goes through Python, as before.
 * Reads are columnar when every split is raw, else rows (Spark cannot mix the two in one scan).
 */
public final class ProviderTable implements SupportsRead, SupportsWrite {


    private final Table python;
    private final RawPlan plan;
    private final boolean clustered;

    /**
     * {@code clustered}: a batch read's or write's table, loaded through the provider's catalog
     * ({@link ProviderCatalog}): its writes take the rows as they are (as the provider's table of the written
     * DataFrame's schema did) and cluster them by the table's bucket ({@link BucketClustering#forDataSource}).
     */
    ProviderTable(Table python, String planFile, boolean clustered) {
        this.python = python;
        this.plan = new RawPlan(planFile);
        this.clustered = clustered;
    }

    /**
     * {@code python} (a {@code PythonTable} of a fresh {@code PythonDataSourceV2}, named {@code managed}) with its
     * batch scans reading raw splits in the JVM. For other JVM callers of the Python source (a catalog's table):
     * the Python source must be created by the scan (its options then carry the plan file), as a fresh
     * {@code PythonDataSourceV2} per scan does.
     */
    public static ProviderTable of(Table python) {
        return new ProviderTable(python, RawSplits.newPlanFile(), false);
    }


    @Override
    public String name() {
        return python.name();
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
        return python.schema();
    }

    @Override
    public Transform[] partitioning() {
        return python.partitioning();
    }

    @Override
    public Map<String, String> properties() {
        return python.properties();
    }

    @Override
    public Set<TableCapability> capabilities() {
        if (!clustered) {
            return python.capabilities();
        }
        Set<TableCapability> out = EnumSet.copyOf(python.capabilities());
        out.add(TableCapability.ACCEPT_ANY_SCHEMA);   // `_row_kind`, a key Python casts: Python checks the rows
        return out;
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        SupportsWrite writes = (SupportsWrite) python;
        return clustered ? BucketClustering.forDataSource(writes::newWriteBuilder, info)
            : LogPublish.builder(writes::newWriteBuilder, info);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        Map<String, String> with = new HashMap<>(options.asCaseSensitiveMap());
        with.put(RawSplits.RAW_PLAN_OPTION, plan.file());
        HadoopFiles.markS3a(with);
        return new Builder(((SupportsRead) python).newScanBuilder(new CaseInsensitiveStringMap(with)));
    }

    private final class Builder implements SupportsPushDownFilters {
        private final ScanBuilder python;
        private Filter[] filters = new Filter[0];

        Builder(ScanBuilder python) {
            this.python = python;
        }

        @Override
        public Filter[] pushFilters(Filter[] filters) {
            this.filters = filters;   // the raw splits skip row groups by them (Spark applies them to the rows)
            return ((SupportsPushDownFilters) python).pushFilters(filters);
        }

        @Override
        public Filter[] pushedFilters() {
            return ((SupportsPushDownFilters) python).pushedFilters();
        }

        @Override
        public Scan build() {
            return new ProviderScan(python.build(), filters);
        }
    }

    private final class ProviderScan implements Scan {
        private final Scan python;
        private final Filter[] filters;

        ProviderScan(Scan python, Filter[] filters) {
            this.python = python;
            this.filters = filters;
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
        public Batch toBatch() {
            return RawSplits.withRawSplits(python.toBatch(), python.readSchema(), plan, filters);
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            return python.toMicroBatchStream(checkpointLocation);
        }

        @Override
        public ContinuousStream toContinuousStream(String checkpointLocation) {
            return python.toContinuousStream(checkpointLocation);
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
        public ColumnarSupportMode columnarSupportMode() {
            return ColumnarSupportMode.PARTITION_DEFINED;
        }
    }

}
