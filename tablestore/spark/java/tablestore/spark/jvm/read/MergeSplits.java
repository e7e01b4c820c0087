package tablestore.spark.jvm.read;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.stream.IntStream;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.parquet.filter2.predicate.FilterPredicate;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.ProjectingInternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.datasources.parquet.VectorizedParquetRecordReader;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import tablestore.spark.jvm.mirror.Contract;

/**
 * The merged splits of the managed scans: a bucket of a primary-key table of the default merge engine whose files
 * are several sorted runs (or one run holding deletes), merged in the task's JVM instead of a Python worker, by the
 * rule of filestore/merge.py: per key the record of the highest sequence number wins, and a DELETE winner removes
 * the key. Python's plan (tablestore/spark/read.py, {@code SplitRead.merge_runs}) names the runs, newest first, each
 * its files in key order; each run is read by Spark's vectorized Parquet reader, and the runs' heads are compared by
 * key in the key codec's order (filestore/keycodec.py: integers by value, strings by their UTF-8 bytes; the plan
 * offers only keys of such types). The filters on key columns alone skip row groups and pages in every run (a key
 * they rule out is ruled out in each run alike); a filter on another column skips nothing here, since the newest
 * version of a key may fail it while an older one passes. Spark evaluates every filter on the merged rows.
 */
final class MergeSplits {
    private MergeSplits() {
    }

    private static final byte DELETE = 1;   // filestore.meta.ValueKind.DELETE

    /**
     * The split of {@code runs} (one plan entry) for a scan of {@code read}'s columns: the runs read those, the key
     * columns of {@code table} ({@code keys}) and the system columns.
     */
    static MergeSplit split(JsonNode runs, StructType read, StructType table, List<String> keys, Filter[] filters,
                            HashMap<String, String> hadoop) {
        StructType columns = read;
        for (String k : keys) {
            if (!Arrays.asList(columns.fieldNames()).contains(k)) {
                columns = columns.add(table.apply(k));
            }
        }
        columns = columns.add(Contract.SEQUENCE_COLUMN, DataTypes.LongType, false)
            .add(Contract.VALUE_KIND_COLUMN, DataTypes.ByteType, false);
        int[] keyOrdinals = keys.stream().mapToInt(columns::fieldIndex).toArray();
        Filter[] onKeys = Arrays.stream(filters).filter(f -> keys.containsAll(Arrays.asList(f.references())))
            .toArray(Filter[]::new);
        String[][] files = new String[runs.size()][];
        for (int r = 0; r < files.length; r++) {
            List<String> paths = new ArrayList<>();
            runs.get(r).forEach(f -> paths.add(f.asText()));
            files[r] = paths.toArray(new String[0]);
        }
        return new MergeSplit(files, columns, read.size(), keyOrdinals, hadoop,
            ParquetPredicates.of(onKeys, columns));
    }

    /**
     * A bucket's runs (newest first, each its files in key order), the columns read from every file (the scan's
     * {@code width} first, then the keys it does not read, {@code _SEQUENCE_NUMBER} and {@code _VALUE_KIND}), the
     * keys' positions among them, the Hadoop settings of remote files and the predicate that skips row groups.
     */
    static final class MergeSplit implements InputPartition {
        final String[][] runs;
        final StructType columns;
        final int width;
        final int[] keys;
        final HashMap<String, String> hadoop;
        final FilterPredicate filter;

        MergeSplit(String[][] runs, StructType columns, int width, int[] keys, HashMap<String, String> hadoop,
                   FilterPredicate filter) {
            this.runs = runs;
            this.columns = columns;
            this.width = width;
            this.keys = keys;
            this.hadoop = hadoop;
            this.filter = filter;
        }
    }

    /** One key column's order between two runs' rows. */
    private interface KeyOrder {
        int compare(ColumnVector a, int i, ColumnVector b, int j);
    }

    private static KeyOrder order(DataType t) {
        if (t instanceof LongType) {
            return (a, i, b, j) -> Long.compare(a.getLong(i), b.getLong(j));
        }
        if (t instanceof IntegerType || t instanceof DateType) {
            return (a, i, b, j) -> Integer.compare(a.getInt(i), b.getInt(j));
        }
        if (t instanceof StringType) {
            return (a, i, b, j) -> a.getUTF8String(i).binaryCompare(b.getUTF8String(j));
        }
        if (t instanceof ShortType) {
            return (a, i, b, j) -> Short.compare(a.getShort(i), b.getShort(j));
        }
        if (t instanceof ByteType) {
            return (a, i, b, j) -> Byte.compare(a.getByte(i), b.getByte(j));
        }
        if (t instanceof BooleanType) {
            return (a, i, b, j) -> Boolean.compare(a.getBoolean(i), b.getBoolean(j));
        }
        throw new IllegalArgumentException("a merge key of type " + t.simpleString());
    }

    /** A run's records in key order: its files one after the other, a batch at a time. */
    private static final class Run {
        private final MergeSplit split;
        private final String[] files;
        private int nextFile;
        private VectorizedParquetRecordReader reader;
        private boolean opened;   // the file system of its files (see FilteredOpen.open)
        ColumnarBatch batch;
        ColumnVector[] keys;
        ColumnVector seq;
        ColumnVector kind;
        int row;
        private int rows;
        boolean live = true;
        boolean consumed = true;   // its head was taken (or it has none yet): advance before the next merge step

        Run(MergeSplit split, String[] files) {
            this.split = split;
            this.files = files;
            this.row = -1;
        }

        /** To the next record; false (and not live) past the run's last. */
        boolean advance() throws IOException {
            consumed = false;
            if (++row < rows) {
                return true;
            }
            while (true) {
                if (reader == null) {
                    if (nextFile >= files.length) {
                        live = false;
                        return false;
                    }
                    reader = FilteredOpen.open(files[nextFile++], split.columns, split.filter, split.hadoop, opened);
                    opened = true;
                }
                if (reader.nextKeyValue()) {
                    batch = (ColumnarBatch) reader.getCurrentValue();
                    rows = batch.numRows();
                    row = 0;
                    if (rows == 0) {
                        continue;
                    }
                    keys = new ColumnVector[split.keys.length];   // a file's reader has a batch of its own
                    for (int k = 0; k < keys.length; k++) {
                        keys[k] = batch.column(split.keys[k]);
                    }
                    seq = batch.column(split.columns.size() - 2);
                    kind = batch.column(split.columns.size() - 1);
                    return true;
                }
                reader.close();
                reader = null;
            }
        }

        void close() throws IOException {
            if (reader != null) {
                reader.close();
                reader = null;
            }
        }
    }

    /** The merge of a split's runs: the scan's columns of each key's winning record, in key order. */
    static final class Reader implements PartitionReader<InternalRow> {
        private final Run[] runs;
        private final KeyOrder[] orders;
        private final int[] ties;
        private Run winner;
        private final ProjectingInternalRow view;

        Reader(MergeSplit split) {
            runs = new Run[split.runs.length];
            for (int r = 0; r < runs.length; r++) {
                runs[r] = new Run(split, split.runs[r]);
            }
            orders = new KeyOrder[split.keys.length];
            for (int k = 0; k < orders.length; k++) {
                orders[k] = order(split.columns.fields()[split.keys[k]].dataType());
            }
            ties = new int[runs.length];
            StructType out = new StructType(Arrays.copyOf(split.columns.fields(), split.width));
            view = RawSplits.Projected.view(out, IntStream.range(0, split.width).toArray());
        }

        private int compare(Run a, Run b) {
            for (int k = 0; k < orders.length; k++) {
                ColumnVector x = a.keys[k];
                ColumnVector y = b.keys[k];
                boolean xn = x.isNullAt(a.row);
                boolean yn = y.isNullAt(b.row);
                int d = xn || yn ? Boolean.compare(!xn, !yn) : orders[k].compare(x, a.row, y, b.row);
                if (d != 0) {
                    return d;
                }
            }
            return 0;
        }

        @Override
        public boolean next() throws IOException {
            while (true) {
                Run min = null;
                int tied = 0;
                for (int r = 0; r < runs.length; r++) {
                    Run run = runs[r];
                    if (run.consumed && run.live) {
                        run.advance();
                    }
                    if (!run.live) {
                        continue;
                    }
                    int d = min == null ? -1 : compare(run, min);
                    if (d < 0) {
                        min = run;
                        tied = 0;
                        ties[tied++] = r;
                    } else if (d == 0) {
                        ties[tied++] = r;
                    }
                }
                if (min == null) {
                    winner = null;
                    return false;
                }
                Run best = null;
                for (int t = 0; t < tied; t++) {
                    Run run = runs[ties[t]];
                    run.consumed = true;
                    if (best == null || run.seq.getLong(run.row) > best.seq.getLong(best.row)) {
                        best = run;
                    }
                }
                if (best.kind.getByte(best.row) != DELETE) {
                    winner = best;
                    return true;
                }
            }
        }

        @Override
        public InternalRow get() {
            view.project(winner.batch.getRow(winner.row));
            return view;
        }

        @Override
        public void close() throws IOException {
            IOException failed = null;
            for (Run run : runs) {
                try {
                    run.close();
                } catch (IOException e) {
                    failed = failed == null ? e : failed;
                }
            }
            if (failed != null) {
                throw failed;
            }
        }
    }
}
