package tablestore.spark.jvm;

import org.apache.spark.sql.catalyst.analysis.NoSuchFunctionException;
import org.apache.spark.sql.connector.catalog.FunctionCatalog;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import tablestore.spark.jvm.mirror.BucketFunction;

/**
 * A function-only catalog serving the tablestore bucket functions by name, e.g. with
 * {@code spark.sql.catalog.ts_bucket=tablestore.spark.jvm.BucketFunctionCatalog}:
 * <pre>  SELECT ts_bucket.`tablestore_bucket:4:int64|string`(id, name) FROM t</pre>
 * is each row's bucket in a 4-bucket table keyed by (int64, string). It shows (and tests) what a table catalog's
 * {@code loadFunction} does with {@link #load(Identifier)}.
 */
public final class BucketFunctionCatalog implements FunctionCatalog {
    private String name = "ts_bucket";

    @Override
    public void initialize(String name, CaseInsensitiveStringMap options) {
        this.name = name;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public Identifier[] listFunctions(String[] namespace) {
        return new Identifier[0];   // one function per key-type list and bucket count: loaded by name only
    }

    @Override
    public UnboundFunction loadFunction(Identifier ident) throws NoSuchFunctionException {
        UnboundFunction function = load(ident);
        if (function == null) {
            throw new NoSuchFunctionException(ident);
        }
        return function;
    }

    /** The bucket function {@code ident} names (no namespace, a {@link BucketFunction#name} name), or null. */
    public static UnboundFunction load(Identifier ident) {
        if (ident.namespace().length != 0 || !BucketFunction.isBucketFunctionName(ident.name())) {
            return null;
        }
        return BucketFunction.fromName(ident.name());
    }
}
