package tablestore.spark.jvm.catalog;

import org.apache.spark.QueryContext;
import org.apache.spark.sql.AnalysisException;

import scala.Option;

/** Spark analysis errors carrying the Python catalog's message verbatim. */
final class Errors {
    private Errors() {
    }

    static AnalysisException analysis(String message, Throwable cause) {
        scala.collection.immutable.Map<String, String> none = scala.collection.immutable.Map$.MODULE$.empty();
        return new AnalysisException(message, Option.empty(), Option.empty(), Option.apply(cause), Option.empty(),
            none, new QueryContext[0]);
    }

    static AnalysisException analysis(PythonServiceException e) {
        return analysis(e.getMessage(), e);
    }

    /** A Spark API that cannot declare AnalysisException: rethrown unchecked, as Spark itself does. */
    static RuntimeException unchecked(PythonServiceException e) {
        return sneaky(analysis(e));
    }

    @SuppressWarnings("unchecked")
    private static <T extends Throwable> RuntimeException sneaky(Throwable t) throws T {
        throw (T) t;
    }
}
