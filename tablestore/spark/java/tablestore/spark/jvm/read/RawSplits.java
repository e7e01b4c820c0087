package tablestore.spark.jvm.read;

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
import org.apache.spark.sql.catalyst.ProjectingInternalRow;
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
import org.apache.parquet.filter2.predicate.FilterPredicate;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.roaringbitmap.longlong.Roaring64NavigableMap;

import tablestore.spark.jvm.HadoopFiles;
import tablestore.spark.jvm.TaskErrors;
import tablestore.spark.jvm.mirror.Contract;

/**
 * The raw-split reading of the {@code managed} scans (Paimon's raw-convertible splits), for both front doors (the
 * managed table's scans, {@code catalog.ManagedScan}, whichever front door loaded it): the Python reader's plan file
 * ({@link #RAW_PLAN_OPTION}, tablestore/spark/read.py step 4) names the splits that need no merge, which Spark's own
 * vectorized Parquet reader then reads instead of a Python worker.
 */
public final class RawSplits {
    private RawSplits() {
    }

    /** The option naming the raw-plan file: tablestore/spark/read.py's RAW_PLAN_OPTION. */
    public static final String RAW_PLAN_OPTION = Contract.RAW_PLAN_OPTION;

    private static File planDir;

    /** A new file path for a raw plan or a JVM write plan (the file is not created). */
    public static String newPlanFile() {
        return planFile(java.util.UUID.randomUUID().toString());
    }

    /** The plan file path of {@code name} (one directory per JVM; the file is not created). */
    public static synchronized String planFile(String name) {
        try {
            if (planDir == null) {
                planDir = java.nio.file.Files.createTempDirectory("tablestore-raw-plan-").toFile();
                planDir.deleteOnExit();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return new File(planDir, name + ".json").getAbsolutePath();
    }

    /**
     * The raw-split plan Python's reader writes to {@code file} (the scan's {@link #RAW_PLAN_OPTION}) when it plans
     * the input partitions: read (then removed) once, kept for later calls.
     */
    public static final class RawPlan {
        final String file;
        private JsonNode plan;

        public RawPlan(String file) {
            this.file = file;
        }

        /** A plan made already (the catalog service's): no file. */
        static RawPlan of(JsonNode plan) {
            RawPlan out = new RawPlan(null);
            out.plan = plan;
            return out;
        }

        /** A plan for a new scan: its file, to pass to Python as {@link #RAW_PLAN_OPTION}, is not created yet. */
        public static RawPlan create() {
            return new RawPlan(newPlanFile());
        }

        public String file() {
            return file;
        }

        synchronized JsonNode read() {
            File f = file == null ? null : new File(file);
            if (f != null && f.exists()) {
                try {
                    plan = new ObjectMapper().readTree(f);
                } catch (IOException e) {
                    throw new UncheckedIOException("reading the raw-split plan " + f, e);
                }
                f.delete();
            }
            return plan;
        }
    }

    /**
     * {@code python}, the batch of a Python scan whose options carried {@code plan}'s file, with the splits Python
     * handed over read by Spark's vectorized Parquet reader (for JVM callers with scans of their own: the catalog).
     */
    public static Batch withRawSplits(Batch python, StructType schema, RawPlan plan) {
        return withRawSplits(python, schema, plan, new Filter[0]);
    }

    /**
     * The same, the raw splits skipping the row groups and pages that {@code filters} (the scan's pushed filters,
     * which Spark still applies to the rows) rule out by their statistics ({@link ParquetPredicates}).
     */
    public static Batch withRawSplits(Batch python, StructType schema, RawPlan plan, Filter[] filters) {
        return withRawSplits(python, schema, plan, filters, schema);
    }

    /**
     * The same, its rows of {@code read}'s columns only (a subset of {@code schema}'s, in its order: Spark's column
     * pruning): the raw splits read only those columns' chunks, the Python splits' rows (all columns) are projected.
     * The filters whose columns are not all read skip nothing (partition columns': the plan already left out the
     * other partitions' files).
     */
    public static Batch withRawSplits(Batch python, StructType schema, RawPlan plan, Filter[] filters,
                                      StructType read) {
        List<String> names = Arrays.asList(read.fieldNames());
        Filter[] usable = Arrays.stream(filters).filter(f -> names.containsAll(Arrays.asList(f.references())))
            .toArray(Filter[]::new);
        return new RawSplitBatch(python, read, plan, ParquetPredicates.of(usable, read), ordinals(schema, read),
            schema, filters);
    }

    /**
     * A scan whose every split is raw, as {@code plan} (a raw-plan document the catalog service made: no Python
     * partitions) names them; filters and columns as for {@link #withRawSplits}.
     */
    public static Batch planned(JsonNode plan, StructType schema, Filter[] filters, StructType read) {
        return withRawSplits(null, schema, RawPlan.of(plan), filters, read);
    }

    /**
     * The columns Spark asks a scan of {@code schema} for ({@code required}'s fields that are {@code schema}'s, in
     * {@code schema}'s order), or {@code schema} itself when that is all of them.
     */
    public static StructType pruned(StructType schema, StructType required) {
        List<String> wanted = Arrays.asList(required.fieldNames());
        StructType out = new StructType();
        for (StructField f : schema.fields()) {
            if (wanted.contains(f.name())) {
                out = out.add(f);
            }
        }
        return out.size() == schema.size() ? schema : out;
    }

    /** The positions in {@code schema} of {@code read}'s columns; null when {@code read} is all of it. */
    public static int[] ordinals(StructType schema, StructType read) {
        if (read.size() == schema.size()) {
            return null;
        }
        int[] out = new int[read.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = schema.fieldIndex(read.fields()[i].name());
        }
        return out;
    }

    private static final class RawSplitBatch implements Batch {
        private final Batch python;
        private final StructType schema;
        private final RawPlan plan;
        private final FilterPredicate filter;
        private final int[] projection;
        private final StructType table;
        private final Filter[] filters;
        private boolean columnar;

        /**
         * {@code python}: the Python scan's batch (null: every split raw); {@code schema}: the columns read;
         * {@code projection}: their positions in a Python row (null: all); {@code table}: the table's columns and
         * {@code filters} the scan's (for the merged splits, {@link MergeSplits}).
         */
        RawSplitBatch(Batch python, StructType schema, RawPlan plan, FilterPredicate filter, int[] projection,
                      StructType table, Filter[] filters) {
            this.python = python;
            this.schema = schema;
            this.plan = plan;
            this.filter = filter;
            this.projection = projection;
            this.table = table;
            this.filters = filters;
        }

        @Override
        public InputPartition[] planInputPartitions() {
            InputPartition[] planned = new InputPartition[0];
            try {
                if (python != null) {
                    planned = python.planInputPartitions();
                }
            } catch (Exception e) {   // the Python reader's option and table errors (AnalysisException), as their line
                throw TaskErrors.driver(e);
            }
            JsonNode raw = plan.read();
            if (raw == null || raw.path("raw").size() + raw.path("merge").size() == 0) {
                return planned;
            }
            List<InputPartition> out = new ArrayList<>();
            if (raw.path("python_partitions").asInt(planned.length) > 0) {
                out.addAll(Arrays.asList(planned));
            }
            HashMap<String, String> hadoop = HadoopFiles.settings(raw.get("hadoop"));
            JsonNode vectors = raw.path("vectors");
            for (int s = 0; s < raw.path("raw").size(); s++) {
                JsonNode files = raw.path("raw").get(s);
                String[] paths = new String[files.size()];
                DeletedRows.Ref[] deleted = new DeletedRows.Ref[paths.length];
                for (int f = 0; f < paths.length; f++) {
                    paths[f] = files.get(f).asText();
                    deleted[f] = DeletedRows.Ref.of(vectors.path(s).get(f));
                }
                out.add(new RawSplit(paths, deleted, hadoop, filter));
            }
            List<String> keys = new ArrayList<>();
            raw.path("keys").forEach(k -> keys.add(k.asText()));
            for (JsonNode runs : raw.path("merge")) {
                out.add(MergeSplits.split(runs, schema, table, keys, filters, hadoop));
            }
            columnar = out.stream().allMatch(p -> p instanceof RawSplit);
            return out.toArray(new InputPartition[0]);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new ReaderFactory(python == null ? null : python.createReaderFactory(), columnar, schema,
                projection);
        }
    }

    /**
     * A split Spark's Parquet reader reads: its files (paths, or {@code s3a://} URLs; in key order, or, when some
     * carry deletion vectors, in no order: nothing here relies on one), per file its deletion vector or null
     * ({@link DeletedRows}), the Hadoop settings its files' file system is opened with ({@link HadoopFiles}), and
     * the predicate whose row groups and pages it reads (null: all).
     */
    static final class RawSplit implements InputPartition {
        final String[] files;
        final DeletedRows.Ref[] vectors;
        final HashMap<String, String> hadoop;
        final FilterPredicate filter;

        RawSplit(String[] files, DeletedRows.Ref[] vectors, HashMap<String, String> hadoop, FilterPredicate filter) {
            this.files = files;
            this.vectors = vectors;
            this.hadoop = hadoop;
            this.filter = filter;
        }
    }

    static final class ReaderFactory implements PartitionReaderFactory, Serializable {
        private final PartitionReaderFactory python;
        private final boolean columnar;
        private final StructType schema;
        private final int[] projection;

        ReaderFactory(PartitionReaderFactory python, boolean columnar, StructType schema, int[] projection) {
            this.python = python;
            this.columnar = columnar;
            this.schema = schema;
            this.projection = projection;
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return columnar;
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new RawSplitReader((RawSplit) partition, schema);
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            if (partition instanceof RawSplit) {
                return new RowsOf(new RawSplitReader((RawSplit) partition, schema));
            }
            if (partition instanceof MergeSplits.MergeSplit) {
                return new MergeSplits.Reader((MergeSplits.MergeSplit) partition);
            }
            PartitionReader<InternalRow> rows = python.createReader(partition);
            return projection == null ? rows : new Projected(rows, schema, projection);
        }
    }

    /** A Python split's rows (every column) as the scan's pruned rows: a view, no copy. */
    static final class Projected implements PartitionReader<InternalRow> {
        private final PartitionReader<InternalRow> rows;
        private final ProjectingInternalRow view;

        Projected(PartitionReader<InternalRow> rows, StructType schema, int[] projection) {
            this.rows = rows;
            this.view = view(schema, projection);
        }

        /** A reusable view of a row's fields at {@code ordinals}, as {@code schema}'s. */
        static ProjectingInternalRow view(StructType schema, int[] ordinals) {
            List<Object> boxed = new ArrayList<>();
            for (int o : ordinals) {
                boxed.add(o);
            }
            return new ProjectingInternalRow(schema,
                scala.jdk.javaapi.CollectionConverters.asScala(boxed).toIndexedSeq());
        }

        @Override
        public boolean next() throws IOException {
            return rows.next();
        }

        @Override
        public InternalRow get() {
            view.project(rows.get());
            return view;
        }

        @Override
        public void close() throws IOException {
            rows.close();
        }
    }

    /**
     * A raw split's files, one after the other, through Spark's vectorized Parquet reader; a file with a deletion
     * vector without the rows it deletes ({@link DeletedRows}).
     */
    static final class RawSplitReader implements PartitionReader<ColumnarBatch> {
        private final RawSplit split;
        private final StructType schema;
        private int next;
        private VectorizedParquetRecordReader reader;
        private ColumnarBatch batch;
        private boolean opened;   // the file system of its files (see FilteredOpen.open)
        private Roaring64NavigableMap deleted;   // the open file's deleted positions (null: none)
        private KeptRows[] kept;

        RawSplitReader(RawSplit split, StructType schema) {
            this.split = split;
            this.schema = schema;
        }

        @Override
        public boolean next() throws IOException {
            while (true) {
                if (reader == null) {
                    if (next >= split.files.length) {
                        return false;
                    }
                    open(split.files[next++]);
                }
                if (reader.nextKeyValue()) {
                    batch = (ColumnarBatch) reader.getCurrentValue();
                    if (deleted != null) {
                        batch = DeletedRows.kept(batch, deleted, kept);
                    }
                    return true;
                }
                reader.close();
                reader = null;
            }
        }

        private void open(String file) throws IOException {
            DeletedRows.Ref vector = split.vectors[next - 1];
            deleted = vector == null ? null : DeletedRows.read(vector, file, split.hadoop);
            if (deleted != null && deleted.isEmpty()) {
                deleted = null;
            }
            StructType columns = deleted == null ? schema : DeletedRows.withRowIndex(schema);
            kept = new KeptRows[schema.size()];
            reader = FilteredOpen.open(file, columns, split.filter, split.hadoop, opened, deleted != null);
            opened = true;
        }

        @Override
        public ColumnarBatch get() {
            return batch;
        }

        @Override
        public void close() throws IOException {
            if (reader != null) {
                reader.close();
                reader = null;
            }
        }
    }

    /** The rows of a columnar reader (when a scan mixes raw and Python splits it reads rows). */
    static final class RowsOf implements PartitionReader<InternalRow> {
        private final RawSplitReader batches;
        private Iterator<InternalRow> rows = Collections.emptyIterator();

        RowsOf(RawSplitReader batches) {
            this.batches = batches;
        }

        @Override
        public boolean next() throws IOException {
            while (!rows.hasNext()) {
                if (!batches.next()) {
                    return false;
                }
                rows = batches.get().rowIterator();
            }
            return true;
        }

        @Override
        public InternalRow get() {
            return rows.next();
        }

        @Override
        public void close() throws IOException {
            batches.close();
        }
    }
}
