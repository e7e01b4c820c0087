package tablestore.spark.jvm.catalog;

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
 * The only code that touches Spark's internal Python data source classes (PySpark 4.1 and later: the same
 * {@code PythonDataSourceV2()}, {@code setShortName}, {@code getTable} and {@code PythonTable} read/write builders
 * in 4.1, 4.2 and 4.3; jar.py compiles the folder of the newest Spark version at or below the installed one).
 *
 * <p>A fresh {@code PythonDataSourceV2} per scan or write: it caches the Python data source and its planned
 * partitions from its first use.
 */
final class PythonSourceBridge {
    static final String SHORT_NAME = "managed";

    private PythonSourceBridge() {
    }

    private static Table pythonTable(StructType schema, Transform[] partitioning) {
        PythonDataSourceV2 source = new PythonDataSourceV2();
        source.setShortName(SHORT_NAME);
        return source.getTable(schema, partitioning, Map.of());
    }

    static ScanBuilder scanBuilder(StructType schema, Transform[] partitioning, CaseInsensitiveStringMap options) {
        return ((SupportsRead) pythonTable(schema, partitioning)).newScanBuilder(options);
    }

    static WriteBuilder writeBuilder(StructType schema, Transform[] partitioning, LogicalWriteInfo info) {
        return ((SupportsWrite) pythonTable(schema, partitioning)).newWriteBuilder(info);
    }
}
