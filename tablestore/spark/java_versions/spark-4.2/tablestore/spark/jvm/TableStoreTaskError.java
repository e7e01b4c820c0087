package tablestore.spark.jvm;

import java.util.Map;

import org.apache.spark.QueryContext;
import org.apache.spark.api.python.PythonException;

import scala.Option;

/**
 * A tablestore error of a write task, as Spark hands on a Python worker's error; its message is one line
 * ({@link TaskErrors}). Since Spark 4.2 a PythonException is a SparkThrowable whose message parameters hold the
 * Python traceback.
 */
public final class TableStoreTaskError extends PythonException {
    private static final long serialVersionUID = 1L;

    TableStoreTaskError(String message, Throwable cause) {
        super(message, cause, Option.empty(), scala.collection.immutable.Map$.MODULE$.empty(), new QueryContext[0]);
    }

    /** The Python traceback a Python worker's error carries. */
    static String traceback(PythonException e) {
        Map<String, String> parameters = e.getMessageParameters();
        return parameters != null && parameters.containsKey("traceback") ? parameters.get("traceback")
            : String.valueOf(e.getMessage());
    }
}
