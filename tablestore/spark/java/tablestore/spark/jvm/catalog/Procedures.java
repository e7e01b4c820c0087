package tablestore.spark.jvm.catalog;

import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure;

/** The procedures of the managed catalog ({@code CALL managed.system.<name>(...)}). */
public final class Procedures {
    private Procedures() {
    }

    public static UnboundProcedure load(ManagedCatalog catalog, Identifier ident) {
        throw Errors.unchecked(new PythonServiceException("NoSuchProcedure", "procedure " + catalog.name() + "."
            + ident + " does not exist"));
    }

    public static Identifier[] list(String[] namespace) {
        return new Identifier[0];
    }
}
