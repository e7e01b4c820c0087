package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
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

import tablestore.spark.jvm.PythonSourceBridge;

/**
 * A managed table as Spark sees it: its metadata (loaded from the Python catalog service), and scans and writes
 * handed to the Python data source {@code managed} with the table's identity injected into the options
 * ({@code table}, {@code warehouse}, the catalog's {@code table-storage.*} options, the time-travel snapshot).
 */
public class ManagedTable implements SupportsRead, SupportsWrite, SupportsMetadataColumns, SupportsDeleteV2 {
    private final ManagedCatalog catalog;
    private final Identifier ident;
    private final StructType schema;
    private final List<String> partitionKeys = new ArrayList<>();
    private final List<String> primaryKey = new ArrayList<>();
    private final List<String> bucketKey = new ArrayList<>();
    private final List<String> bucketKeyTypes = new ArrayList<>();
    private final int buckets;
    private final Map<String, String> properties = new LinkedHashMap<>();
    private final Map<String, String> identity = new HashMap<>();
    private final Long snapshotId;
    private final JsonNode meta;
    private final Map<String, String> readOptions;

    ManagedTable(ManagedCatalog catalog, Identifier ident, JsonNode meta, Map<String, String> readOptions) {
        this.meta = meta;
        this.readOptions = readOptions;
        this.catalog = catalog;
        this.ident = ident;
        this.schema = (StructType) DataType.fromJson(meta.get("schema").asText());
        meta.path("partition_keys").forEach(n -> partitionKeys.add(n.asText()));
        meta.path("primary_key").forEach(n -> primaryKey.add(n.asText()));
        meta.path("bucket_key").forEach(n -> bucketKey.add(n.asText()));
        meta.path("bucket_key_types").forEach(n -> bucketKeyTypes.add(n.asText()));
        this.buckets = meta.path("bucket").asInt(1);
        meta.path("options").fields().forEachRemaining(e -> properties.put(e.getKey(), e.getValue().asText()));
        properties.put(TableCatalog.PROP_PROVIDER, PythonSourceBridge.SHORT_NAME);
        if (meta.hasNonNull("comment")) {
            properties.put(TableCatalog.PROP_COMMENT, meta.get("comment").asText());
        }
        this.snapshotId = meta.hasNonNull("snapshot_id") ? meta.get("snapshot_id").asLong() : null;
        identity.put("table", String.join(".", ManagedCatalog.tableName(ident)));
        identity.put("warehouse", catalog.warehouse());
        identity.putAll(catalog.sessionOptions());
        identity.putAll(readOptions);
    }

    ManagedCatalog catalog() {
        return catalog;
    }

    Identifier identifier() {
        return ident;
    }

    List<String> partitionKeys() {
        return partitionKeys;
    }

    List<String> primaryKey() {
        return primaryKey;
    }

    /** The columns the table's bucket function hashes: the primary key, or the whole row without one. */
    List<String> bucketKey() {
        return bucketKey;
    }

    /** The Arrow types of {@link #bucketKey()}, as pyarrow prints them. */
    List<String> bucketKeyTypes() {
        return bucketKeyTypes;
    }

    int buckets() {
        return buckets;
    }

    /** What the table's writes cluster by (one writer per bucket). */
    BucketClustering.Layout layout() {
        return new BucketClustering.Layout(partitionKeys, bucketKey, bucketKeyTypes, buckets,
            BucketClustering.Layout.inPrimaryKey(bucketKey, primaryKey));
    }

    @Override
    public String name() {
        return catalog.name() + "." + ident;
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
        return schema;
    }

    @Override
    public Transform[] partitioning() {
        Transform[] out = new Transform[partitionKeys.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = Expressions.identity(partitionKeys.get(i));
        }
        return out;
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
        NamedReference[] refs = new NamedReference[primaryKey.size()];
        for (int i = 0; i < refs.length; i++) {
            refs[i] = Expressions.column(primaryKey.get(i));
        }
        return new Constraint[] {Constraint.primaryKey(ident.name() + "_pk", refs).enforced(false).rely(false).build()};
    }

    /** This table with its scans reading snapshot {@code id} (a MERGE's or UPDATE's read: RowLevelRewrite). */
    ManagedTable readingSnapshot(long id) {
        Map<String, String> read = new HashMap<>(readOptions);
        read.put("snapshot-id", Long.toString(id));
        return new ManagedTable(catalog, ident, meta, read);
    }

    /** The latest snapshot when this table object was loaded (null: empty table). */
    Long loadedSnapshot() {
        return snapshotId;
    }

    /** The snapshot this table object was loaded at (null: empty table). */
    @Override
    public String version() {
        return snapshotId == null ? null : snapshotId.toString();
    }

    @Override
    public Set<TableCapability> capabilities() {
        return Set.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE, TableCapability.MICRO_BATCH_READ,
            TableCapability.STREAMING_WRITE, TableCapability.TRUNCATE, TableCapability.OVERWRITE_BY_FILTER,
            TableCapability.OVERWRITE_DYNAMIC);
    }

    /** The options of a Python scan or write: the caller's, then the table's identity (which wins). */
    CaseInsensitiveStringMap injected(Map<String, String> callerOptions, Map<String, String> extra) {
        Map<String, String> out = new HashMap<>(callerOptions);
        out.putAll(identity);
        out.putAll(extra);
        return new CaseInsensitiveStringMap(out);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        return new ManagedScan.Builder(schema, partitioning(), injected(options.asCaseSensitiveMap(), Map.of()));
    }

    /** {@code _row_kind}: the change kind of a streaming read (see ManagedScan). */
    @Override
    public MetadataColumn[] metadataColumns() {
        return SparkTraits.ROW_KIND_METADATA_COLUMN ? new MetadataColumn[] {new ManagedScan.RowKindColumn()}
            : new MetadataColumn[0];
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        return new ManagedWriteBuilder(this, info);
    }

    /** DELETE FROM: the Python table reads the rows the predicates select and writes them back as -D in one commit
     * (tablestore.spark.sql_actions.delete_where); a predicate Python cannot evaluate fails with its message. */
    @Override
    public boolean canDeleteWhere(Predicate[] predicates) {
        return true;
    }

    @Override
    public void deleteWhere(Predicate[] predicates) {
        catalog.call("delete_where", catalog.args("table", ManagedCatalog.tableName(ident),
            "predicate", PredicateJson.toJson(predicates)));
    }
}
