package tablestore.spark.jvm.read;

import java.io.IOException;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapred.FileSplit;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.parquet.filter2.predicate.FilterPredicate;
import org.apache.parquet.hadoop.ParquetInputFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetReadSupport;
import org.apache.spark.sql.execution.datasources.parquet.VectorizedParquetRecordReader;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.Option;

import tablestore.spark.jvm.HadoopFiles;

/**
 * Opens a data file for Spark's vectorized Parquet reader (the raw and the merged splits' files, {@link #open}), with
 * a predicate the way Spark's own Parquet scan does
 * (a Hadoop split of the whole file, the predicate and the requested schema in the reader's configuration): Parquet
 * then leaves out the row groups whose statistics rule the predicate out, and, through the file's column indexes,
 * the pages. The settings are those Spark's path-only {@code initialize(path, columns)} (the unfiltered case) uses,
 * so both read the same columns the same way. Checked on PySpark 4.1, 4.2 and 4.3.
 */
final class FilteredOpen {
    /** ParquetReadSupport.SPARK_ROW_REQUESTED_SCHEMA. */
    static final String REQUESTED_SCHEMA = "org.apache.spark.sql.parquet.row.requested_schema";

    private FilteredOpen() {
    }

    /**
     * Hadoop's default settings, read once per JVM: a new {@code Configuration} parses its default resources again
     * when first read (milliseconds, for each file a merged split opens); each open copies these instead.
     */
    private static final class Defaults {
        static final Configuration CONF = loaded();

        private static Configuration loaded() {
            Configuration conf = new Configuration();
            conf.size();   // parses the resources now
            return conf;
        }
    }

    /**
     * {@code file} opened by Spark's vectorized Parquet reader for {@code columns} (their types checked against the
     * file's), returning batches, skipping what {@code filter} (null: nothing) rules out; a remote file's file system
     * opened with {@code hadoop} first unless {@code opened} (the caller opened it for an earlier file of its split:
     * the files of a split share their warehouse).
     */
    static VectorizedParquetRecordReader open(String file, StructType columns, FilterPredicate filter,
                                              HashMap<String, String> hadoop, boolean opened) throws IOException {
        return open(file, columns, filter, hadoop, opened, false);
    }

    /**
     * The same; {@code rowIndex}: {@code columns} end with Spark's temporary row-index column
     * ({@link DeletedRows#ROW_INDEX}), which the reader fills with each row's position in the file (opened the
     * configured way even without a predicate: the path-only way knows only the file's columns).
     */
    static VectorizedParquetRecordReader open(String file, StructType columns, FilterPredicate filter,
                                              HashMap<String, String> hadoop, boolean opened, boolean rowIndex)
            throws IOException {
        if (!opened && HadoopFiles.remote(file)) {
            HadoopFiles.open(file, hadoop);   // the reader opens it with a bare Configuration: cache its file system
        }
        VectorizedParquetRecordReader reader = new VectorizedParquetRecordReader(false, 4096);
        if (filter == null && !rowIndex && !hasTimestampNtz(columns)) {
            reader.initialize(file, Arrays.asList(columns.fieldNames()));
        } else {
            FilteredOpen.initialize(reader, file, columns, filter, hadoop);
        }
        ColumnarBatch first = reader.resultBatch();
        for (int i = 0; i < columns.fields().length; i++) {
            StructField want = columns.fields()[i];
            if (!first.column(i).dataType().sameType(want.dataType())) {
                reader.close();
                throw new IOException("data file " + file + ": column " + want.name() + " reads as "
                        + first.column(i).dataType().simpleString() + ", the table's type is "
                        + want.dataType().simpleString());
            }
        }
        reader.enableReturningBatches();
        return reader;
    }

    /**
     * Whether {@code columns} hold a TIMESTAMP_NTZ: the path-only way infers each column's type from the file with a
     * bare configuration, which reads a local (not UTC-adjusted) Parquet timestamp as TIMESTAMP; the configured way
     * reads the requested schema's types.
     */
    private static boolean hasTimestampNtz(StructType columns) {
        for (StructField f : columns.fields()) {
            if (f.dataType() instanceof org.apache.spark.sql.types.TimestampNTZType) {
                return true;
            }
        }
        return false;
    }

    static void initialize(VectorizedParquetRecordReader reader, String file, StructType schema,
            FilterPredicate filter, Map<String, String> hadoop) throws IOException {
        Configuration conf = new Configuration(Defaults.CONF);
        if (hadoop != null) {
            hadoop.forEach(conf::set);
        }
        conf.setBoolean("spark.sql.parquet.binaryAsString", false);
        conf.setBoolean("spark.sql.parquet.int96AsTimestamp", false);
        conf.setBoolean("spark.sql.caseSensitive", false);
        conf.setBoolean("spark.sql.parquet.inferTimestampNTZ.enabled", false);
        conf.setBoolean("spark.sql.legacy.parquet.nanosAsLong", false);
        conf.set(ParquetInputFormat.READ_SUPPORT_CLASS, ParquetReadSupport.class.getName());
        conf.set(REQUESTED_SCHEMA, schema.json());
        if (filter != null) {
            ParquetInputFormat.setFilterPredicate(conf, filter);
        }
        Path path = new Path(file);
        long length = path.getFileSystem(conf).getFileStatus(path).getLen();
        FileSplit split = new FileSplit(path, 0, length, new String[0]);
        try {
            reader.initialize(split, new TaskAttemptContextImpl(conf, new TaskAttemptID()), Option.empty(),
                Option.empty(), Option.empty());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted opening " + file, e);
        }
    }
}
