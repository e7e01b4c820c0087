package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.MetadataColumn;
import org.apache.spark.sql.connector.catalog.SupportsDeleteV2;
import org.apache.spark.sql.connector.catalog.SupportsMetadataColumns;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.constraints.Constraint;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import tablestore.spark.jvm.HadoopFiles;
import tablestore.spark.jvm.PythonSourceBridge;
import tablestore.spark.jvm.read.RawSplits;

/**
 * A managed table as Spark sees it, whichever front door loaded it: the SQL catalog ({@link ManagedCatalog#loadTable},
 * metadata from the Python catalog service) or the {@code managed} data source ({@code format("managed")}:
 * {@link #ofDataSource}, metadata from the Python data source). Both have the same scans ({@link ManagedScan}: planned
 * by the catalog service when every split needs no merge, else by the Python source with the filters pushed to it,
 * splits that need no merge read by Spark's vectorized Parquet reader, {@code _row_kind}, streams of the table's
 * changes) and the same writes ({@link ManagedWriteBuilder}: overwrite modes, one writer per bucket, the
 * JVM writer, the log produced by the executors); what differs is data:
 * <ul>
 *   <li>where the Python side lives: a catalog table takes a fresh Python source per scan and write (it outlives a
 *       query; a Python source caches its planned partitions); a data source table uses the one its provider
 *       created for the lookup (Spark creates one provider per lookup, as for its own Python sources) for its writes
 *       and streaming reads, with the provider's raw-split plan file, and a fresh one per batch scan (a DataFrame's
 *       queries each plan with their own filters);</li>
 *   <li>what Spark can ask of the table's catalog: a catalog table's writes and a data source table loaded through
 *       the provider's catalog ({@code ProviderCatalog}, a {@code FunctionCatalog}) cluster by the table's bucket; a
 *       table Spark got from the provider without a catalog (streaming reads and writes) cannot;</li>
 *   <li>the layout writes cluster by: the catalog's metadata, or for a data source write loaded from the catalog
 *       service when the write is built ({@link BucketClustering#load});</li>
 *   <li>the schema: a data source table's schema is Python's answer for the read or write (a streaming read's is the
 *       changelog's, {@code _row_kind} first: its scans then stream Python's changelog as it is).</li>
 * </ul>
 */
public class ManagedTable implements SupportsRead, SupportsWrite, SupportsMetadataColumns, SupportsDeleteV2 {
    private static final Set<TableCapability> CATALOG_CAPABILITIES = Set.of(TableCapability.BATCH_READ,
        TableCapability.BATCH_WRITE, TableCapability.MICRO_BATCH_READ, TableCapability.STREAMING_WRITE,
        TableCapability.TRUNCATE, TableCapability.OVERWRITE_BY_FILTER, TableCapability.OVERWRITE_DYNAMIC);

    private final ManagedCatalog catalog;   // null: a data source table
    private final Identifier ident;         // null: a data source table
    private final String name;
    private final String tableName;
    private final StructType schema;
    private final Transform[] partitioning;
    private final Map<String, String> properties = new LinkedHashMap<>();
    private final Set<TableCapability> capabilities;
    private final List<String> primaryKey = new ArrayList<>();
    private final BucketClustering.Layout layout;   // null: loaded when a write is built
    private final boolean clusteredWrites;
    private final Map<String, String> identity = new HashMap<>();
    private final Long snapshotId;
    private final JsonNode meta;
    private final Map<String, String> readOptions;
    private final Table python;   // null: a fresh Python source per scan and write
    private final RawSplits.RawPlan sharedPlan;   // the provider's source's raw-split plan

    ManagedTable(ManagedCatalog catalog, Identifier ident, JsonNode meta, Map<String, String> readOptions) {
        this.meta = meta;
        this.readOptions = readOptions;
        this.catalog = catalog;
        this.ident = ident;
        this.name = catalog.name() + "." + ident;
        this.tableName = String.join(".", ManagedCatalog.tableName(ident));
        this.schema = (StructType) DataType.fromJson(meta.get("schema").asText());
        List<String> partitionKeys = new ArrayList<>();
        meta.path("partition_keys").forEach(n -> partitionKeys.add(n.asText()));
        this.partitioning = partitionKeys.stream().map(Expressions::identity).toArray(Transform[]::new);
        meta.path("primary_key").forEach(n -> primaryKey.add(n.asText()));
        this.layout = BucketClustering.Layout.of(meta);
        this.clusteredWrites = true;
        this.capabilities = CATALOG_CAPABILITIES;
        meta.path("options").fields().forEachRemaining(e -> properties.put(e.getKey(), e.getValue().asText()));
        properties.put(TableCatalog.PROP_PROVIDER, PythonSourceBridge.SHORT_NAME);
        if (meta.hasNonNull("comment")) {
            properties.put(TableCatalog.PROP_COMMENT, meta.get("comment").asText());
        }
        this.snapshotId = meta.hasNonNull("snapshot_id") ? meta.get("snapshot_id").asLong() : null;
        identity.put("table", tableName);
        identity.put("warehouse", catalog.warehouse());
        identity.putAll(catalog.sessionOptions());
        identity.putAll(readOptions);
        this.python = null;
        this.sharedPlan = null;
    }

    private ManagedTable(Table python, String planFile, boolean clusteredWrites, Map<String, String> options) {
        this.catalog = null;
        this.ident = null;
        this.meta = null;
        this.readOptions = Map.of();
        this.snapshotId = null;
        this.layout = null;
        this.python = python;
        this.sharedPlan = new RawSplits.RawPlan(planFile);
        this.clusteredWrites = clusteredWrites;
        this.name = python.name();
        this.tableName = options.getOrDefault("path", options.getOrDefault("table", python.name()));
        this.schema = python.schema();
        this.partitioning = python.partitioning();
        this.properties.putAll(python.properties());
        if (clusteredWrites) {   // `_row_kind`, a key Python casts: Python checks the rows (the provider's batch writes)
            Set<TableCapability> out = EnumSet.copyOf(python.capabilities());
            out.add(TableCapability.ACCEPT_ANY_SCHEMA);
            this.capabilities = out;
        } else {
            this.capabilities = python.capabilities();
        }
    }

    /**
     * The table of a {@code managed} data source read or write: {@code python}, the table of the provider's Python
     * source (created with {@code options}, which carry the table and warehouse), whose scans write their raw-split
     * plans to {@code planFile}; {@code clusteredWrites}: loaded through the provider's catalog (a batch read or
     * write: its writes take the rows as they are, Python casting them, and cluster them by the table's bucket).
     */
    public static ManagedTable ofDataSource(Table python, String planFile, boolean clusteredWrites,
                                            Map<String, String> options) {
        return new ManagedTable(python, planFile, clusteredWrites, options);
    }

    /** The catalog that loaded this table, null for a data source table. */
    ManagedCatalog catalog() {
        return catalog;
    }

    Identifier identifier() {
        return ident;
    }

    /** The table's name in its warehouse ({@code db.t}), as Python's messages name it. */
    String tableName() {
        return tableName;
    }

    /** The primary key (a data source table: unknown, empty). */
    List<String> primaryKey() {
        return primaryKey;
    }

    /** What the table's writes cluster by (one writer per bucket); null: not known until a write is built. */
    BucketClustering.Layout layout() {
        return layout;
    }

    /** Whether Spark can cluster this table's writes by its bucket function (the table's catalog has it). */
    boolean clusteredWrites() {
        return clusteredWrites;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
        return schema;
    }

    /** Whether the schema is a changelog's ({@code _row_kind} a column: a data source's streaming read or write). */
    boolean changelogSchema() {
        return Arrays.asList(schema.fieldNames()).contains(ManagedScan.ROW_KIND);
    }

    @Override
    public Transform[] partitioning() {
        return partitioning;
    }

    @Override
    public Map<String, String> properties() {
        return properties;
    }

    @Override
    public Constraint[] constraints() {
        if (primaryKey.isEmpty()) {
            return new Constraint[0];
        }
        NamedReference[] refs = primaryKey.stream().map(Expressions::column).toArray(NamedReference[]::new);
        return new Constraint[] {Constraint.primaryKey(ident.name() + "_pk", refs).enforced(false).rely(false).build()};
    }

    /** This catalog table with its scans reading snapshot {@code id} (a MERGE's or UPDATE's read: RowLevelRewrite). */
    ManagedTable readingSnapshot(long id) {
        Map<String, String> read = new HashMap<>(readOptions);
        read.put("snapshot-id", Long.toString(id));
        return new ManagedTable(catalog, ident, meta, read);
    }

    /** The latest snapshot when this table object was loaded (null: empty table). */
    Long loadedSnapshot() {
        return snapshotId;
    }

    /** The snapshot this table object was loaded at (null: empty table, or a data source table). */
    @Override
    public String version() {
        return snapshotId == null ? null : snapshotId.toString();
    }

    @Override
    public Set<TableCapability> capabilities() {
        return capabilities;
    }

    /** The options of a Python scan or write: the caller's, then the table's identity (which wins), then extra's. */
    CaseInsensitiveStringMap injected(Map<String, String> callerOptions, Map<String, String> extra) {
        Map<String, String> out = new HashMap<>(callerOptions);
        out.putAll(identity);
        out.putAll(extra);
        return new CaseInsensitiveStringMap(out);
    }

    /**
     * Whether a scan of {@code schema} goes to the provider's Python source (else to a fresh one): only a data source's
     * streaming read (its schema the changelog's). A batch scan takes a fresh source, as a catalog table's does: Spark's
     * Python source keeps the partitions it planned first, so the provider's source would give a DataFrame's later
     * queries the plan of its first, pruned by that query's filters.
     */
    private boolean sharedSource(StructType schema) {
        return python != null && schema.equals(this.schema) && changelogSchema();
    }

    /**
     * The raw-split plan of a new scan of {@code schema}: a fresh Python source's is new; the provider's source's is
     * the table's one (that source plans once and writes its plan file once).
     */
    RawSplits.RawPlan newRawPlan(StructType schema) {
        return sharedSource(schema) ? sharedPlan : RawSplits.RawPlan.create();
    }

    /** A Python scan of {@code schema} with {@code options} (which carry the raw plan's file). */
    ScanBuilder pythonScan(StructType schema, Map<String, String> options, RawSplits.RawPlan plan) {
        Map<String, String> with = new HashMap<>(options);
        with.put(RawSplits.RAW_PLAN_OPTION, plan.file());
        HadoopFiles.markS3a(with);
        CaseInsensitiveStringMap all = new CaseInsensitiveStringMap(with);
        return LogTaskPlacement.of(sharedSource(schema) ? ((SupportsRead) python).newScanBuilder(all)
            : PythonSourceBridge.scanBuilder(schema, partitioning, all), with);   // the log job: by bucket
    }

    /** The Python write of {@code info} (whose options are the write's, identity injected). */
    WriteBuilder pythonWrite(LogicalWriteInfo info) {
        return python != null ? ((SupportsWrite) python).newWriteBuilder(info)
            : PythonSourceBridge.writeBuilder(schema, partitioning, info);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        return new ManagedScan.Builder(this, injected(options.asCaseSensitiveMap(), Map.of()));
    }

    /** {@code _row_kind}: the change kind of a streaming read (see ManagedScan); a changelog schema has it already. */
    @Override
    public MetadataColumn[] metadataColumns() {
        return SparkTraits.ROW_KIND_METADATA_COLUMN && !changelogSchema()
            ? new MetadataColumn[] {new ManagedScan.RowKindColumn()} : new MetadataColumn[0];
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        return new ManagedWriteBuilder(this, info);
    }

    /** DELETE FROM: the Python table reads the rows the predicates select and writes them back as -D in one commit
     * (tablestore.spark.sql_actions.delete_where); a predicate Python cannot evaluate fails with its message. Only
     * the SQL catalog's tables are named by a DELETE. */
    @Override
    public boolean canDeleteWhere(Predicate[] predicates) {
        return catalog != null;
    }

    @Override
    public void deleteWhere(Predicate[] predicates) {
        if (catalog == null) {
            throw new UnsupportedOperationException("DELETE FROM " + tableName + ": use the managed SQL catalog");
        }
        catalog.call("delete_where", catalog.args("table", ManagedCatalog.tableName(ident),
            "predicate", PredicateJson.toJson(predicates)));
    }
}
