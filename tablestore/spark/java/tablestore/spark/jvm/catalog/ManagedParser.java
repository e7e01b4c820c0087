package tablestore.spark.jvm.catalog;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.List;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.trees.CurrentOrigin$;
import org.apache.spark.sql.connector.catalog.CatalogManager;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;

import scala.Option;

/**
 * The session's SQL parser with the managed catalog's statements ({@link SqlRewrite}): {@code parsePlan} (and
 * {@code parsePlanWithParameters}) hand the delegate the rewritten CALL; every other method, and every other
 * statement, goes to the delegate untouched.
 *
 * <p>A dynamic proxy rather than a class implementing {@code ParserInterface}: the interface gains methods between
 * Spark releases (4.3 adds {@code splitStatements} and {@code parseTemporalTableIdentifier}), and a proxy forwards
 * whatever the running Spark declares.
 */
final class ManagedParser {
    private ManagedParser() {
    }

    static ParserInterface wrap(SparkSession session, ParserInterface delegate) {
        return (ParserInterface) Proxy.newProxyInstance(ManagedParser.class.getClassLoader(),
            new Class<?>[] {ParserInterface.class}, (proxy, method, args) -> invoke(session, delegate, method, args));
    }

    private static Object invoke(SparkSession session, ParserInterface delegate, Method method, Object[] args)
            throws Throwable {
        if (method.getDeclaringClass() == Object.class) {
            switch (method.getName()) {
                case "equals":
                    return args[0] == delegate;
                case "hashCode":
                    return System.identityHashCode(delegate);
                default:
                    return "ManagedParser(" + delegate + ")";
            }
        }
        String name = method.getName();
        if ((name.equals("parsePlan") || name.equals("parsePlanWithParameters")) && args != null
                && args.length >= 1 && args[0] instanceof String) {
            String rewritten;
            try {
                rewritten = SqlRewrite.rewrite((String) args[0], parts -> resolve(session, parts));
            } catch (SqlRewrite.RewriteException e) {
                throw notAllowed((String) args[0], e.getMessage());
            }
            if (rewritten != null) {
                Object[] changed = args.clone();
                changed[0] = rewritten;
                args = changed;
            }
        }
        try {
            return method.invoke(delegate, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    /** A ParseException (what parsePlan declares; a proxy may not throw other checked exceptions). */
    private static ParseException notAllowed(String sql, String message) {
        scala.collection.immutable.Map<String, String> params =
            scala.collection.immutable.Map$.MODULE$.<String, String>empty().updated("message", message);
        return new ParseException(Option.apply(sql), CurrentOrigin$.MODULE$.get(), "_LEGACY_ERROR_TEMP_0035", params);
    }

    /** {catalog, database, table} when the name is a table name in a managed catalog, else null. */
    static String[] resolve(SparkSession session, List<String> parts) {
        CatalogManager catalogs = session.sessionState().catalogManager();
        if (parts.size() == 3 && managed(catalogs, parts.get(0))) {
            return new String[] {parts.get(0), parts.get(1), parts.get(2)};
        }
        CatalogPlugin current = catalogs.currentCatalog();
        if (!(current instanceof ManagedCatalog)) {
            return null;
        }
        if (parts.size() == 2) {
            return new String[] {current.name(), parts.get(0), parts.get(1)};
        }
        String[] namespace = catalogs.currentNamespace();
        if (parts.size() == 1 && namespace.length == 1) {
            return new String[] {current.name(), namespace[0], parts.get(0)};
        }
        return null;
    }

    private static boolean managed(CatalogManager catalogs, String name) {
        try {
            return catalogs.isCatalogRegistered(name) && catalogs.catalog(name) instanceof ManagedCatalog;
        } catch (RuntimeException e) {
            return false;
        }
    }
}
