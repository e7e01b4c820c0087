package tablestore.spark.jvm.catalog;

import java.io.IOException;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.MetadataColumn;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.NullNode;

import tablestore.spark.jvm.HadoopFiles;
import tablestore.spark.jvm.read.RawSplits;
import tablestore.spark.jvm.mirror.Contract;

/**
 * Scans of a managed table, from either front door ({@link ManagedTable}). Batch: planned by the catalog service
 * when every split needs no merge (then read by Spark's vectorized Parquet reader alone, {@link RawSplits}), else the
 * Python data source's scan of the table's columns (filters pushed down), its splits that need no merge read by
 * Spark's vectorized Parquet reader. Streaming: the Python source's stream of the table's changes, whose rows are
 * {@code _row_kind} + the columns; the table exposes {@code _row_kind} as a metadata column, so
 * {@code spark.readStream.table(t).select("_row_kind", "*")} is the changelog. A batch read that selects
 * {@code _row_kind} sees {@code +I} for every row. A table whose schema is the changelog's (a data source's
 * streaming read, {@code _row_kind} first) streams Python's changelog as it is.
 */
final class ManagedScan {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(ManagedScan.class);
    static final String ROW_KIND = Contract.ROW_KIND;

    private ManagedScan() {
    }

    /** The {@code _row_kind} metadata column. */
    static final class RowKindColumn implements MetadataColumn {
        @Override
        public String name() {
            return ROW_KIND;
        }

        @Override
        public DataType dataType() {
            return DataTypes.StringType;
        }

        @Override
        public boolean isNullable() {
            return false;
        }

        @Override
        public String comment() {
            return "change kind of a streaming read: +I, -U, +U, -D (a batch read: +I)";
        }
    }

    static final class Builder implements ScanBuilder, SupportsPushDownFilters, SupportsPushDownRequiredColumns {
        private final ManagedTable table;
        private final StructType schema;
        private final CaseInsensitiveStringMap options;
        private final RawSplits.RawPlan rawPlan;
        private ScanBuilder python;   // created when the scan needs the Python source (see servicePlan)
        private JsonNode servicePlan;   // the catalog service's plan, once asked (NullNode: none)
        private boolean rowKind = false;
        private StructType read;   // the data columns Spark asks for, in the table's order
        private Filter[] pushed = new Filter[0];
        private Filter[] onData = new Filter[0];

        Builder(ManagedTable table, CaseInsensitiveStringMap options) {
            this.table = table;
            this.schema = table.schema();
            this.read = schema;
            this.options = options;
            // batch splits that need no merge are handed to Spark's vectorized Parquet reader (RawSplits)
            this.rawPlan = table.newRawPlan(schema);
        }

        private ScanBuilder python() {
            if (python == null) {
                python = table.pythonScan(schema, options.asCaseSensitiveMap(), rawPlan);
            }
            return python;
        }

        /**
         * A catalog table's scan is first planned by the catalog service (tablestore/spark/read.py,
         * {@code plan_in_service}): when every split is a raw split, the scan needs no Python worker at all (PySpark
         * starts one for each plan of a Python data source); otherwise (or on any error, which the Python source then
         * raises as before) the Python source plans it. Either front door: each query of a DataFrame is planned
         * anew, at the latest snapshot unless its options name one.
         */
        private JsonNode servicePlan(Filter[] filters) {
            if (servicePlan != null) {
                return servicePlan;
            }
            servicePlan = NullNode.getInstance();
            if (table.changelogSchema()) {
                return servicePlan;
            }
            Map<String, String> readOptions = new HashMap<>(options.asCaseSensitiveMap());
            HadoopFiles.markS3a(readOptions);
            Map<String, Object> args = new HashMap<>();
            args.put("read_options", readOptions);
            args.put("columns", Arrays.asList(schema.fieldNames()));
            args.put("predicates", predicates(filters));
            try {
                JsonNode answer = PythonService.call("plan_read", args);
                if (answer != null && answer.isObject()) {
                    servicePlan = answer;
                }
            } catch (RuntimeException e) {
                LOG.debug("table {}: the catalog service did not plan the scan; the Python source plans it",
                    table.tableName(), e);
            }
            return servicePlan;
        }

        /** Spark's filters in the {@code predicates} hand-over format, one node per filter, in order. */
        private static String predicates(Filter[] filters) {
            Expression[] v2 = new Expression[filters.length];
            for (int i = 0; i < filters.length; i++) {
                try {
                    v2[i] = filters[i].toV2();
                } catch (RuntimeException e) {
                    v2[i] = null;
                }
            }
            return PredicateJson.toJson(v2);
        }

        @Override
        public void pruneColumns(StructType required) {
            if (table.changelogSchema()) {   // a data source's streaming read: Python's rows as they are
                return;
            }
            rowKind = Arrays.asList(required.fieldNames()).contains(ROW_KIND);
            read = RawSplits.pruned(schema, required);   // raw splits read only these; Python's rows are projected
        }

        @Override
        public Filter[] pushFilters(Filter[] filters) {
            List<Filter> onData = new ArrayList<>();
            List<Filter> kept = new ArrayList<>();
            for (Filter f : filters) {
                (Arrays.asList(f.references()).contains(ROW_KIND) ? kept : onData).add(f);
            }
            this.onData = onData.toArray(new Filter[0]);   // the raw splits skip row groups by them
            JsonNode planned = servicePlan(this.onData);
            if (!planned.isNull()) {
                planned.path("spark_filters").forEach(i -> kept.add(this.onData[i.asInt()]));
                pushed = this.onData;
                return kept.toArray(new Filter[0]);
            }
            if (!(python() instanceof SupportsPushDownFilters)) {
                return filters;
            }
            kept.addAll(Arrays.asList(((SupportsPushDownFilters) python).pushFilters(this.onData)));
            pushed = ((SupportsPushDownFilters) python).pushedFilters();
            return kept.toArray(new Filter[0]);
        }

        @Override
        public Filter[] pushedFilters() {
            return pushed;
        }

        @Override
        public Scan build() {
            JsonNode planned = servicePlan(onData);
            return planned.isNull() ? new TableScan(this, python().build(), null)
                : new TableScan(this, null, planned.get("plan"));
        }
    }

    static final class TableScan implements Scan {
        private final Builder builder;
        private final Scan python;      // null: planned by the catalog service, every split raw
        private final JsonNode rawPlan;  // the catalog service's raw-split plan (python null)

        TableScan(Builder builder, Scan python, JsonNode rawPlan) {
            this.builder = builder;
            this.python = python;
            this.rawPlan = rawPlan;
        }

        @Override
        public StructType readSchema() {
            return builder.rowKind ? builder.read.add(ROW_KIND, DataTypes.StringType, false) : builder.read;
        }

        @Override
        public String description() {
            return python != null ? python.description() : "(" + rawPlan.path("raw").size() + " raw splits, "
                + rawPlan.path("merge").size() + " merged in the JVM, planned by the catalog service)";
        }

        @Override
        public Batch toBatch() {
            Batch batch = python == null
                ? RawSplits.planned(rawPlan, builder.schema, builder.onData, builder.read)
                : RawSplits.withRawSplits(python.toBatch(), builder.schema, builder.rawPlan, builder.onData,
                    builder.read);
            if (!builder.rowKind) {
                return batch;
            }
            int n = builder.read.size();
            return new Batch() {
                @Override
                public InputPartition[] planInputPartitions() {
                    return batch.planInputPartitions();
                }

                @Override
                public PartitionReaderFactory createReaderFactory() {
                    return new Reordered(batch.createReaderFactory(), rowKindLast(n), builder.read);
                }
            };
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            Map<String, String> options = builder.options.asCaseSensitiveMap();
            if (builder.table.changelogSchema()) {   // a data source's streaming read: Python's changelog as it is
                return ServiceChanges.wrap(python.toMicroBatchStream(checkpointLocation), options,
                    python.readSchema());
            }
            if (!SparkTraits.ROW_KIND_METADATA_COLUMN) {
                LOG.warn("streaming read of managed table {}: this Spark (4.1) cannot offer the _row_kind column "
                    + "through the catalog, so the stream gives the table's upserts (+I/+U rows) and no deletions; "
                    + "for the changelog use tablestore.spark.read_changes(spark, table) or "
                    + "spark.readStream.format(\"managed\").load(table)", builder.table.tableName());
            }
            StructType changes = new StructType().add(ROW_KIND, DataTypes.StringType, false);
            for (StructField f : builder.schema.fields()) {
                changes = changes.add(f);
            }
            MicroBatchStream stream = ServiceChanges.wrap(builder.table.pythonScan(changes, options,
                builder.table.newRawPlan(changes)).build().toMicroBatchStream(checkpointLocation), options, changes);
            int n = builder.read.size();
            int[] order = new int[builder.rowKind ? n + 1 : n];
            int[] columns = RawSplits.ordinals(builder.schema, builder.read);
            for (int i = 0; i < n; i++) {
                order[i] = (columns == null ? i : columns[i]) + 1;   // after the change rows' `_row_kind`
            }
            if (builder.rowKind) {
                order[n] = 0;
            }
            return withReaderFactory(stream, order, changes, !builder.rowKind);
        }

        @Override
        public CustomMetric[] supportedCustomMetrics() {
            return python == null ? new CustomMetric[0] : python.supportedCustomMetrics();
        }

        @Override
        public CustomTaskMetric[] reportDriverMetrics() {
            return python == null ? new CustomTaskMetric[0] : python.reportDriverMetrics();
        }

        @Override
        public ColumnarSupportMode columnarSupportMode() {
            return ColumnarSupportMode.PARTITION_DEFINED;   // columnar when every split is raw (RawSplits)
        }
    }

    /** Positions of the output columns in the Python rows: the data columns, then -1 for a constant +I. */
    private static int[] rowKindLast(int n) {
        int[] order = new int[n + 1];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        order[n] = -1;
        return order;
    }

    /**
     * {@code stream} with its reader factory's rows reordered; every other call (offsets, admission control,
     * AvailableNow, metrics) goes to the Python stream unchanged, through a proxy of all its interfaces.
     */
    private static MicroBatchStream withReaderFactory(MicroBatchStream stream, int[] order, StructType input,
            boolean upsertsOnly) {
        Set<Class<?>> interfaces = new LinkedHashSet<>();
        for (Class<?> c = stream.getClass(); c != null; c = c.getSuperclass()) {
            ServiceChanges.collect(c, interfaces);
        }
        InvocationHandler handler = (proxy, method, args) -> {
            try {
                if (method.getName().equals("createReaderFactory") && method.getParameterCount() == 0) {
                    return new Reordered((PartitionReaderFactory) method.invoke(stream), order, input, upsertsOnly);
                }
                if (method.getName().equals("toString") && method.getParameterCount() == 0) {
                    return stream.toString();
                }
                return method.invoke(stream, args);
            } catch (InvocationTargetException e) {
                throw ServiceChanges.thrown(method, e.getCause());
            }
        };
        return (MicroBatchStream) Proxy.newProxyInstance(ManagedScan.class.getClassLoader(),
            interfaces.toArray(new Class<?>[0]), handler);
    }

    /** Rows of {@code delegate} with the columns at {@code order} (-1: the constant {@code +I}). */
    private static final UTF8String UPDATE_BEFORE = UTF8String.fromString("-U");
    private static final UTF8String DELETE = UTF8String.fromString("-D");

    private static boolean retraction(UTF8String kind) {
        return UPDATE_BEFORE.equals(kind) || DELETE.equals(kind);
    }

    static final class Reordered implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final PartitionReaderFactory delegate;
        private final int[] order;
        private final DataType[] types;
        private final boolean upsertsOnly;

        Reordered(PartitionReaderFactory delegate, int[] order, StructType input) {
            this(delegate, order, input, false);
        }

        /**
         * {@code upsertsOnly}: the input's first column is the change kind, and rows of {@code -U} / {@code -D} are
         * left out (a stream read without {@code _row_kind} is the table's upserts, never a retraction that would
         * look like a row).
         */
        Reordered(PartitionReaderFactory delegate, int[] order, StructType input, boolean upsertsOnly) {
            this.delegate = delegate;
            this.order = order;
            this.types = Arrays.stream(input.fields()).map(StructField::dataType).toArray(DataType[]::new);
            this.upsertsOnly = upsertsOnly;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            PartitionReader<InternalRow> reader = delegate.createReader(partition);
            UTF8String insert = UTF8String.fromString("+I");
            return new PartitionReader<InternalRow>() {
                private InternalRow current;

                @Override
                public boolean next() throws IOException {
                    while (reader.next()) {
                        current = reader.get();   // once per row: a reader's get() may not be repeatable
                        if (!upsertsOnly || !retraction(current.getUTF8String(0))) {
                            return true;
                        }
                    }
                    return false;
                }

                @Override
                public InternalRow get() {
                    InternalRow row = current;
                    Object[] values = new Object[order.length];
                    for (int i = 0; i < order.length; i++) {
                        int from = order[i];
                        values[i] = from < 0 ? insert : (row.isNullAt(from) ? null : row.get(from, types[from]));
                    }
                    return new GenericInternalRow(values);
                }

                @Override
                public void close() throws IOException {
                    reader.close();
                }
            };
        }
    }
}
