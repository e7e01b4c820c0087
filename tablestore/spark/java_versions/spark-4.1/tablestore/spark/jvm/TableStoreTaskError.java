package tablestore.spark.jvm;

import org.apache.spark.api.python.PythonException;

/**
 * A tablestore error of a write task, as one line ({@link TaskErrors}). On Spark 4.1 PySpark turns a
 * PythonException thrown by a job into a Python exception only when it comes from a Python UDF (its other ones stay a
 * Py4JJavaError of a hundred lines), while it turns an IllegalArgumentException into one whose text is the
 * message: so here the error is an IllegalArgumentException (a write of rows the table cannot take). Spark 4.1's
 * PythonException keeps a worker's Python traceback in its message.
 */
public final class TableStoreTaskError extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    TableStoreTaskError(String message, Throwable cause) {
        super(message, cause);
    }

    /** The Python traceback a Python worker's error carries. */
    static String traceback(PythonException e) {
        return String.valueOf(e.getMessage());
    }
}
