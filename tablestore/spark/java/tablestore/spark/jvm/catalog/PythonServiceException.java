package tablestore.spark.jvm.catalog;

/** An action of the Python catalog service failed: the Python error's class name and message, verbatim. */
public final class PythonServiceException extends RuntimeException {
    private final String type;

    public PythonServiceException(String type, String message) {
        super(message);
        this.type = type;
    }

    /** The Python error's class name, e.g. {@code TableNotFoundError}. */
    public String type() {
        return type;
    }
}
