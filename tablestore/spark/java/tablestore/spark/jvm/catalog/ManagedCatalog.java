package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.catalyst.analysis.NamespaceAlreadyExistsException;
import org.apache.spark.sql.catalyst.analysis.NoSuchFunctionException;
import org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.catalyst.analysis.NonEmptyNamespaceException;
import org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException;
import org.apache.spark.sql.connector.catalog.FunctionCatalog;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.ProcedureCatalog;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableCatalogCapability;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.TableInfo;
import org.apache.spark.sql.connector.catalog.constraints.Constraint;
import org.apache.spark.sql.connector.catalog.constraints.PrimaryKey;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure;
import org.apache.spark.sql.connector.expressions.IdentityTransform;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import tablestore.spark.jvm.mirror.Contract;

/**
 * The {@code managed} Spark SQL catalog: databases and managed tables of one warehouse. An adapter: metadata
 * actions go to the Python catalog service ({@link PythonService}), scans and writes to the Python data source
 * ({@link ManagedTable}); every rule and message is Python's.
 *
 * <p>Settings ({@code spark.sql.catalog.<name>.*}), read from the session's conf at every call so that {@code SET}
 * takes effect: {@code warehouse}, {@code table-storage.*} session defaults for new tables, and the catalog options
 * ({@code s3.*}: how the warehouse is reached).
 */
public class ManagedCatalog implements TableCatalog, SupportsNamespaces, ProcedureCatalog, FunctionCatalog {
    static final String SESSION_PREFIX = Contract.SESSION_PREFIX;
    /** Catalog options (how the warehouse is reached): catalog/fs_options.py's CATALOG_OPTION_PREFIXES. */
    static final String CATALOG_OPTION_PREFIX = Contract.CATALOG_OPTION_PREFIX;

    private String name;
    private Map<String, String> initial = new HashMap<>();

    @Override
    public void initialize(String name, CaseInsensitiveStringMap options) {
        this.name = name;
        this.initial = new HashMap<>(options.asCaseSensitiveMap());
    }

    @Override
    public String name() {
        return name;
    }

    /** The catalog's settings now: initialize()'s, overridden by the session conf (SET ...). */
    Map<String, String> settings() {
        Map<String, String> settings = new HashMap<>(initial);
        String prefix = "spark.sql.catalog." + name + ".";
        Map<String, String> conf = scala.jdk.javaapi.CollectionConverters.asJava(SQLConf.get().getAllConfs());
        for (Map.Entry<String, String> e : conf.entrySet()) {
            if (e.getKey().startsWith(prefix)) {
                settings.put(e.getKey().substring(prefix.length()), e.getValue());
            }
        }
        return settings;
    }

    String warehouse() {
        return settings().get("warehouse");
    }

    /**
     * The {@code table-storage.*} session options and the {@code s3.*} catalog options (prefixes kept, as the Python
     * catalog takes them).
     */
    Map<String, String> sessionOptions() {
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : settings().entrySet()) {
            if (e.getKey().startsWith(SESSION_PREFIX) || e.getKey().startsWith(CATALOG_OPTION_PREFIX)) {
                out.put(e.getKey(), e.getValue());
            }
        }
        return out;
    }

    /** Args of a Python call: the warehouse and session options, plus {@code extra}. */
    Map<String, Object> args(Object... extra) {
        Map<String, Object> args = new LinkedHashMap<>();
        args.put("warehouse", warehouse());
        args.put("options", sessionOptions());
        for (int i = 0; i + 1 < extra.length; i += 2) {
            args.put((String) extra[i], extra[i + 1]);
        }
        return args;
    }

    static List<String> tableName(Identifier ident) {
        List<String> parts = new ArrayList<>(Arrays.asList(ident.namespace()));
        parts.add(ident.name());
        return parts;
    }

    // -- namespaces ----------------------------------------------------------------------------
    @Override
    public String[][] listNamespaces() {
        JsonNode names = call("list_namespaces", args());
        String[][] out = new String[names.size()][];
        for (int i = 0; i < names.size(); i++) {
            out[i] = new String[] {names.get(i).asText()};
        }
        return out;
    }

    @Override
    public String[][] listNamespaces(String[] namespace) throws NoSuchNamespaceException {
        if (!namespaceExists(namespace)) {
            throw new NoSuchNamespaceException(namespace);
        }
        return new String[0][];
    }

    @Override
    public boolean namespaceExists(String[] namespace) {
        return call("namespace_exists", args("namespace", namespace)).asBoolean();
    }

    @Override
    public Map<String, String> loadNamespaceMetadata(String[] namespace) throws NoSuchNamespaceException {
        if (!namespaceExists(namespace)) {
            throw new NoSuchNamespaceException(namespace);
        }
        Map<String, String> out = new HashMap<>();
        call("load_namespace", args("namespace", namespace)).fields()
            .forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
        return out;
    }

    @Override
    public void createNamespace(String[] namespace, Map<String, String> metadata)
            throws NamespaceAlreadyExistsException {
        if (namespaceExists(namespace)) {
            throw new NamespaceAlreadyExistsException(namespace);
        }
        call("create_namespace", args("namespace", namespace, "properties", metadata));
    }

    @Override
    public void alterNamespace(String[] namespace, NamespaceChange... changes) {
        throw Errors.unchecked(new PythonServiceException("UnsupportedOperation",
            "ALTER DATABASE is not supported by the managed catalog"));
    }

    @Override
    public boolean dropNamespace(String[] namespace, boolean cascade)
            throws NoSuchNamespaceException, NonEmptyNamespaceException {
        if (!namespaceExists(namespace)) {
            throw new NoSuchNamespaceException(namespace);
        }
        if (!cascade && call("list_tables", args("namespace", namespace)).size() > 0) {
            throw new NonEmptyNamespaceException(namespace);
        }
        return call("drop_namespace", args("namespace", namespace, "cascade", cascade)).asBoolean();
    }

    // -- tables --------------------------------------------------------------------------------
    @Override
    public Set<TableCatalogCapability> capabilities() {
        return Set.of(TableCatalogCapability.SUPPORT_TABLE_CONSTRAINT);
    }

    @Override
    public Identifier[] listTables(String[] namespace) throws NoSuchNamespaceException {
        if (!namespaceExists(namespace)) {
            throw new NoSuchNamespaceException(namespace);
        }
        JsonNode names = call("list_tables", args("namespace", namespace));
        Identifier[] out = new Identifier[names.size()];
        for (int i = 0; i < names.size(); i++) {
            out[i] = Identifier.of(namespace, names.get(i).asText());
        }
        return out;
    }

    @Override
    public Table loadTable(Identifier ident) throws NoSuchTableException {
        return loadTable(ident, Map.of());
    }

    /** Time travel: {@code VERSION AS OF n} reads snapshot n. */
    @Override
    public Table loadTable(Identifier ident, String version) throws NoSuchTableException {
        return loadTable(ident, Map.of("version", version));
    }

    /**
     * Time travel: {@code TIMESTAMP AS OF t} (Spark passes microseconds) reads the snapshot current at t, resolved
     * when the query is analysed.
     */
    @Override
    public Table loadTable(Identifier ident, long timestampMicros) throws NoSuchTableException {
        return loadTable(ident, Map.of("timestamp_ms", Math.floorDiv(timestampMicros, 1000L)));
    }

    protected Table loadTable(Identifier ident, Map<String, Object> travel) throws NoSuchTableException {
        JsonNode meta;
        try {
            if (SystemTable.isSystemName(ident)) {   // db.`t$snapshots`, db.`t$files`
                return SystemTable.load(this, ident);
            }
            Map<String, Object> args = args("table", tableName(ident));
            args.putAll(travel);
            meta = PythonService.call("load_table", args);
        } catch (PythonServiceException e) {
            if (e.type().equals("TableNotFoundError") || e.type().equals("InvalidIdentifierError")) {
                throw new NoSuchTableException(ident);
            }
            throw Errors.unchecked(e);
        }
        Map<String, String> readOptions = meta.hasNonNull("read_snapshot_id")
            ? Map.of("snapshot-id", meta.get("read_snapshot_id").asText()) : Map.of();
        return new ManagedTable(this, ident, meta, readOptions);
    }

    @Override
    public Table createTable(Identifier ident, TableInfo info)
            throws TableAlreadyExistsException, NoSuchNamespaceException {
        return create(ident, info.schema(), info.partitions(), info.properties(), info.constraints());
    }

    @Override
    @SuppressWarnings("deprecation")
    public Table createTable(Identifier ident, StructType schema, Transform[] partitions,
            Map<String, String> properties) throws TableAlreadyExistsException, NoSuchNamespaceException {
        return create(ident, schema, partitions, properties, new Constraint[0]);
    }

    private Table create(Identifier ident, StructType schema, Transform[] partitions, Map<String, String> properties,
            Constraint[] constraints) throws TableAlreadyExistsException, NoSuchNamespaceException {
        if (!namespaceExists(ident.namespace())) {
            throw new NoSuchNamespaceException(ident.namespace());
        }
        if (tableExists(ident)) {
            throw new TableAlreadyExistsException(ident);
        }
        List<String> partitionKeys = new ArrayList<>();
        for (Transform t : partitions) {
            if (!(t instanceof IdentityTransform)) {
                throw Errors.unchecked(new PythonServiceException("InvalidTableError", "table " + ident
                    + ": PARTITIONED BY takes columns only, not " + t.describe()));
            }
            partitionKeys.add(String.join(".", ((IdentityTransform) t).ref().fieldNames()));
        }
        List<Map<String, Object>> described = new ArrayList<>();
        for (Constraint c : constraints) {
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("name", c.name());
            d.put("ddl", c.toDDL());
            if (c instanceof PrimaryKey) {
                d.put("kind", "primary_key");
                List<String> cols = new ArrayList<>();
                for (NamedReference ref : ((PrimaryKey) c).columns()) {
                    cols.add(String.join(".", ref.fieldNames()));
                }
                d.put("columns", cols);
            } else {
                d.put("kind", "other");
            }
            described.add(d);
        }
        JsonNode meta;
        try {
            meta = PythonService.call("create_table", args("table", tableName(ident), "schema", schema.json(),
                "partition_keys", partitionKeys, "constraints", described, "properties", properties));
        } catch (PythonServiceException e) {
            if (e.type().equals("TableAlreadyExistsError")) {   // created concurrently since tableExists
                throw new TableAlreadyExistsException(ident);
            }
            if (e.type().equals("DatabaseNotFoundError")) {
                throw new NoSuchNamespaceException(ident.namespace());
            }
            throw Errors.unchecked(e);
        }
        return new ManagedTable(this, ident, meta, Map.of());
    }

    @Override
    public Table alterTable(Identifier ident, TableChange... changes) throws NoSuchTableException {
        Map<String, String> set = new LinkedHashMap<>();
        List<String> unset = new ArrayList<>();
        StructType addColumns = new StructType();     // ADD COLUMNS: the new fields, in order
        StructType columnTypes = new StructType();    // ALTER COLUMN ... TYPE: each column with its new type
        Map<String, String> renames = new LinkedHashMap<>();   // RENAME COLUMN: old name -> new name
        List<String> drop = new ArrayList<>();                 // DROP COLUMN(S)
        List<String> dropIfExists = new ArrayList<>();         // DROP COLUMN(S) IF EXISTS
        for (TableChange change : changes) {
            if (change instanceof TableChange.SetProperty) {
                set.put(((TableChange.SetProperty) change).property(), ((TableChange.SetProperty) change).value());
            } else if (change instanceof TableChange.RemoveProperty) {
                unset.add(((TableChange.RemoveProperty) change).property());
            } else if (change instanceof TableChange.AddColumn) {
                TableChange.AddColumn add = (TableChange.AddColumn) change;
                String name = topLevel(ident, add.fieldNames(), "ADD COLUMN");
                if (add.position() != null) {
                    throw refused(ident, "ADD COLUMN " + name + " " + add.position()
                        + ": columns are added at the end only");
                }
                if (add.defaultValue() != null) {
                    throw refused(ident, "ADD COLUMN " + name + " DEFAULT " + add.defaultValue()
                        + ": an added column has no default (rows written before it read it as null)");
                }
                org.apache.spark.sql.types.Metadata metadata = add.comment() == null
                    ? org.apache.spark.sql.types.Metadata.empty()
                    : new org.apache.spark.sql.types.MetadataBuilder().putString("comment", add.comment()).build();
                addColumns = addColumns.add(name, add.dataType(), add.isNullable(), metadata);
            } else if (change instanceof TableChange.UpdateColumnType) {
                TableChange.UpdateColumnType update = (TableChange.UpdateColumnType) change;
                String name = topLevel(ident, update.fieldNames(), "ALTER COLUMN");
                columnTypes = columnTypes.add(name, update.newDataType(), true);
            } else if (change instanceof TableChange.RenameColumn) {
                TableChange.RenameColumn rename = (TableChange.RenameColumn) change;
                renames.put(topLevel(ident, rename.fieldNames(), "RENAME COLUMN"), rename.newName());
            } else if (change instanceof TableChange.DeleteColumn) {
                TableChange.DeleteColumn delete = (TableChange.DeleteColumn) change;
                (Boolean.TRUE.equals(delete.ifExists()) ? dropIfExists : drop)
                    .add(topLevel(ident, delete.fieldNames(), "DROP COLUMN"));
            } else {
                throw refused(ident, "the managed catalog changes table options (SET/UNSET TBLPROPERTIES), adds "
                    + "columns (ADD COLUMNS), widens column types (ALTER COLUMN ... TYPE), renames columns (RENAME "
                    + "COLUMN) and drops them (DROP COLUMN) only, not " + change);
            }
        }
        loadTable(ident);   // NoSuchTableException first
        JsonNode meta = call("alter_table", args("table", tableName(ident), "set", set, "unset", unset,
            "add_columns", addColumns.json(), "column_types", columnTypes.json(), "rename", renames, "drop", drop,
            "drop_if_exists", dropIfExists));
        return new ManagedTable(this, ident, meta, Map.of());
    }

    private static String topLevel(Identifier ident, String[] fieldNames, String what) {
        if (fieldNames.length != 1) {
            throw refused(ident, what + " " + String.join(".", fieldNames)
                + ": nested fields cannot change; a managed table's schema evolves by top-level columns");
        }
        return fieldNames[0];
    }

    private static RuntimeException refused(Identifier ident, String message) {
        return Errors.unchecked(new PythonServiceException("SchemaEvolutionError", "table " + ident + ": " + message));
    }

    @Override
    public boolean dropTable(Identifier ident) {
        return call("drop_table", args("table", tableName(ident))).asBoolean();
    }

    @Override
    public void renameTable(Identifier from, Identifier to) {
        // RENAME TO u (no database): in the table's own database, as Paimon's catalog reads it
        Identifier target = to.namespace().length == 0 ? Identifier.of(from.namespace(), to.name()) : to;
        call("rename_table", args("table", tableName(from), "new_table", tableName(target)));
    }

    // -- procedures ----------------------------------------------------------------------------
    @Override
    public UnboundProcedure loadProcedure(Identifier ident) {
        return Procedures.load(this, ident);
    }

    @Override
    public Identifier[] listProcedures(String[] namespace) {
        return Procedures.list(namespace);
    }

    /** A Python action; its error as a Spark analysis error with Python's message. */
    /** No listed functions: a table's bucket function (the one its writes cluster by) is loaded by name. */
    @Override
    public Identifier[] listFunctions(String[] namespace) {
        return new Identifier[0];
    }

    /**
     * A table's bucket function or its bucket slot function, which its writes name in their distribution
     * ({@link BucketClustering#loadFunction}, shared with the data source's catalog).
     */
    @Override
    public UnboundFunction loadFunction(Identifier ident) throws NoSuchFunctionException {
        UnboundFunction function = BucketClustering.loadFunction(ident);
        if (function == null) {
            throw new NoSuchFunctionException(ident);
        }
        return function;
    }

    JsonNode call(String action, Map<String, Object> args) {
        try {
            return PythonService.call(action, args);
        } catch (PythonServiceException e) {
            throw Errors.unchecked(e);
        }
    }
}
