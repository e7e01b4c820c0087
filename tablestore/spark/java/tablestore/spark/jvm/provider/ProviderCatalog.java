package tablestore.spark.jvm.provider;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;

import org.apache.spark.sql.catalyst.analysis.NoSuchFunctionException;
import org.apache.spark.sql.connector.catalog.FunctionCatalog;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.errors.QueryCompilationErrors;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import tablestore.spark.jvm.catalog.BucketClustering;
import tablestore.spark.jvm.PythonSourceBridge;

/**
 * The catalog of the {@code managed} data source's batch reads and writes ({@link ManagedProvider} is a
 * {@code SupportsCatalogOptions}): it exists so that a {@code df.write.format("managed")} relation has a catalog
 * that is a {@code FunctionCatalog}, through which Spark resolves the bucket function the write clusters by (one
 * writer per bucket, as an SQL INSERT: {@link BucketClustering}). It holds no state: {@link #loadTable} builds the
 * same table the provider builds without a catalog ({@link ManagedProvider#batchTable}), from the read's or
 * write's options, which the identifier carries ({@link ManagedProvider.OptionsIdentifier}).
 *
 * <p>One hidden catalog per warehouse, named {@code __managed_<digest of the warehouse>}, registered in the
 * session's conf when a read or write first names it ({@link #register}); an identifier without options (a plan
 * loaded again by name) is read from that warehouse. It creates, alters and drops nothing: the save modes that
 * create a table (ErrorIfExists, Ignore) fail as they did before the data source had a catalog.
 */
public final class ProviderCatalog implements TableCatalog, FunctionCatalog {
    static final String NAME_PREFIX = "__managed_";

    private String name;
    private String warehouse;

    @Override
    public void initialize(String name, CaseInsensitiveStringMap options) {
        this.name = name;
        this.warehouse = options.get("warehouse");
    }

    @Override
    public String name() {
        return name;
    }

    /**
     * The name of the catalog of a read or write with {@code options} (its warehouse: the option, else the
     * environment's TABLESTORE_WAREHOUSE: {@link BucketClustering#warehouse}), registered in the session's conf.
     */
    static String register(Map<String, String> options) {
        String warehouse = BucketClustering.warehouse(options);
        String catalog = NAME_PREFIX + (warehouse == null ? "default" : digest(warehouse));
        SQLConf conf = SQLConf.get();
        String key = "spark.sql.catalog." + catalog;
        if (!conf.contains(key)) {
            if (warehouse != null) {
                conf.setConfString(key + ".warehouse", warehouse);
            }
            conf.setConfString(key, ProviderCatalog.class.getName());
        }
        return catalog;
    }

    private static String digest(String warehouse) {
        try {
            byte[] hash = MessageDigest.getInstance("SHA-256").digest(warehouse.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(hash, 0, 8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public Table loadTable(Identifier ident) {
        if (ident instanceof ManagedProvider.OptionsIdentifier) {
            return ((ManagedProvider.OptionsIdentifier) ident).load();
        }
        Map<String, String> options = new HashMap<>();
        options.put("path", String.join(".", ident.namespace()) + "." + ident.name());
        if (warehouse != null) {
            options.put("warehouse", warehouse);
        }
        return new ManagedProvider().batchTable(new CaseInsensitiveStringMap(options));
    }

    /** Only the save modes that create a table ask (DataFrameWriter plans them as CREATE TABLE AS SELECT). */
    @Override
    public boolean tableExists(Identifier ident) {
        throw unsupportedSaveMode();
    }

    @Override
    public Identifier[] listTables(String[] namespace) {
        return new Identifier[0];
    }

    @Override
    @SuppressWarnings("deprecation")
    public Table createTable(Identifier ident, StructType schema, Transform[] partitions,
                             Map<String, String> properties) {
        throw unsupportedSaveMode();
    }

    @Override
    public Table alterTable(Identifier ident, TableChange... changes) {
        throw new UnsupportedOperationException("the managed data source's catalog " + name + " alters nothing: "
            + "use the managed SQL catalog or the Python API");
    }

    @Override
    public boolean dropTable(Identifier ident) {
        throw new UnsupportedOperationException("the managed data source's catalog " + name + " drops nothing: "
            + "use the managed SQL catalog or the Python API");
    }

    @Override
    public void renameTable(Identifier from, Identifier to) {
        throw new UnsupportedOperationException("the managed data source's catalog " + name + " renames nothing");
    }

    /** Spark's error for ErrorIfExists / Ignore on a data source that writes only by append and overwrite. */
    private static RuntimeException unsupportedSaveMode() {
        return sneaky(QueryCompilationErrors.writeWithSaveModeUnsupportedBySourceError(
            PythonSourceBridge.SHORT_NAME, "ErrorIfExists or Ignore"));
    }

    @SuppressWarnings("unchecked")
    private static <T extends Throwable> RuntimeException sneaky(Throwable t) throws T {
        throw (T) t;
    }

    @Override
    public Identifier[] listFunctions(String[] namespace) {
        return new Identifier[0];
    }

    @Override
    public UnboundFunction loadFunction(Identifier ident) throws NoSuchFunctionException {
        UnboundFunction function = BucketClustering.loadFunction(ident);
        if (function == null) {
            throw new NoSuchFunctionException(ident);
        }
        return function;
    }
}
