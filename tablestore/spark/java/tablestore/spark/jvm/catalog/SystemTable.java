package tablestore.spark.jvm.catalog;

import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A read-only system table of a managed table, {@code db.`t$snapshots`} or {@code db.`t$files`}: its typed columns
 * come from the Python helper when the table loads, its rows at every scan (so a DataFrame over it sees the table as
 * it is when it runs), as a LocalScan.
 */
final class SystemTable implements SupportsRead {
    static final char SEPARATOR = '$';

    private final ManagedCatalog catalog;
    private final Identifier ident;
    private final List<String> table;
    private final String kind;
    private final StructType schema;

    private SystemTable(ManagedCatalog catalog, Identifier ident, List<String> table, String kind, StructType schema) {
        this.catalog = catalog;
        this.ident = ident;
        this.table = table;
        this.kind = kind;
        this.schema = schema;
    }

    static boolean isSystemName(Identifier ident) {
        return ident.name().indexOf(SEPARATOR) > 0;
    }

    /** {@code t$kind}: TableNotFoundError (from Python) for an unknown kind or table. */
    static SystemTable load(ManagedCatalog catalog, Identifier ident) {
        int at = ident.name().lastIndexOf(SEPARATOR);
        List<String> table = ManagedCatalog.tableName(Identifier.of(ident.namespace(), ident.name().substring(0, at)));
        String kind = ident.name().substring(at + 1);
        StructType schema = ResultScan.schemaOf(PythonService.call("system_table",
            catalog.args("table", table, "name", kind, "schema_only", true)));
        return new SystemTable(catalog, ident, table, kind, schema);
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
    public Map<String, String> properties() {
        return Map.of("comment", "system table " + kind + " of " + String.join(".", table) + " (read-only)");
    }

    @Override
    public Set<TableCapability> capabilities() {
        return Set.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        return new ScanBuilder() {
            @Override
            public Scan build() {
                return ResultScan.of(catalog.call("system_table", catalog.args("table", table, "name", kind)));
            }
        };
    }
}
