package tablestore.spark.jvm;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The only code that touches Spark's internal Python data source classes, for the catalog's tables and for the
 * {@code managed} provider alike (PySpark 4.1 and later: the same {@code PythonDataSourceV2()},
 * {@code setShortName}, {@code inferSchema}, {@code inferPartitioning}, {@code getTable} and {@code PythonTable}
 * read/write builders in 4.1, 4.2 and 4.3; jar.py compiles the folder of the newest Spark version at or below the
 * installed one).
 *
 * <p>A {@code PythonDataSourceV2} caches the Python data source and its planned partitions from its first use:
 * the catalog takes a fresh one per scan or write; the provider keeps one per lookup, as Spark's own does.
 */
public final class PythonSourceBridge {
    /** The short name of the data source, Python's as well. */
    public static final String SHORT_NAME = "managed";

    private PythonSourceBridge() {
    }

    /** A Python data source named {@link #SHORT_NAME}, resolved lazily through the session's data source manager. */
    public static final class Source {
        private final PythonDataSourceV2 source = new PythonDataSourceV2();

        public Source() {
            source.setShortName(SHORT_NAME);
        }

        public StructType inferSchema(CaseInsensitiveStringMap options) {
            return source.inferSchema(options);
        }

        public Transform[] inferPartitioning(CaseInsensitiveStringMap options) {
            return source.inferPartitioning(options);
        }

        public Table table(StructType schema, Transform[] partitioning, Map<String, String> properties) {
            return source.getTable(schema, partitioning, properties);
        }
    }

    public static ScanBuilder scanBuilder(StructType schema, Transform[] partitioning,
                                          CaseInsensitiveStringMap options) {
        return ((SupportsRead) new Source().table(schema, partitioning, Map.of())).newScanBuilder(options);
    }

    public static WriteBuilder writeBuilder(StructType schema, Transform[] partitioning, LogicalWriteInfo info) {
        return ((SupportsWrite) new Source().table(schema, partitioning, Map.of())).newWriteBuilder(info);
    }
}
