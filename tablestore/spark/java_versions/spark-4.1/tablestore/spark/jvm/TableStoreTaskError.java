package tablestore.spark.jvm;

import org.apache.spark.api.python.PythonException;

/**
 * A tablestore error of a write task, as Spark hands on a Python worker's error; its message is one line
 * ({@link TaskErrors}). Spark 4.1's PythonException has a message and a cause only, the Python traceback in the
 * message.
 */
public final class TableStoreTaskError extends PythonException {
    private static final long serialVersionUID = 1L;

    TableStoreTaskError(String message, Throwable cause) {
        super(message, cause);
    }

    /** The Python traceback a Python worker's error carries. */
    static String traceback(PythonException e) {
        return String.valueOf(e.getMessage());
    }
}
