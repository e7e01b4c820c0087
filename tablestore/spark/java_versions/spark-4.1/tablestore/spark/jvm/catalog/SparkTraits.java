package tablestore.spark.jvm.catalog;

/** What this Spark version supports that others do not (PySpark 4.1). */
final class SparkTraits {
    /**
     * Spark 4.1's micro-batch planning never tells a scan builder which columns a query reads (no
     * {@code pruneColumns}), so a stream cannot know whether a query selected the {@code _row_kind} metadata
     * column: the column is not offered (use tablestore.spark.read_changes for the changelog).
     */
    static final boolean ROW_KIND_METADATA_COLUMN = false;

    private SparkTraits() {
    }
}
