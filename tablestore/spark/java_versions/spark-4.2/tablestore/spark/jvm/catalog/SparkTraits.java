package tablestore.spark.jvm.catalog;

/** What this Spark version supports that others do not (PySpark 4.2 and later). */
final class SparkTraits {
    /** Micro-batch planning prunes columns, so a stream knows whether the query selected {@code _row_kind}. */
    static final boolean ROW_KIND_METADATA_COLUMN = true;

    private SparkTraits() {
    }
}
