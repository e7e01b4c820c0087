package managed;

/**
 * {@code format("managed")} resolves to this class when the tablestore Spark jar is on the classpath (Spark tries
 * {@code <format>.DefaultSource} after the registered short names): see {@link tablestore.spark.jvm.provider.ManagedProvider}.
 */
public final class DefaultSource extends tablestore.spark.jvm.provider.ManagedProvider {
}
