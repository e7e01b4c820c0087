package tablestore.spark.jvm.write;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.column.ParquetProperties;
import org.apache.parquet.column.values.factory.DefaultValuesWriterFactory;
import org.apache.parquet.hadoop.CodecFactory;
import org.apache.parquet.hadoop.metadata.CompressionCodecName;
import org.apache.parquet.hadoop.util.HadoopOutputFile;
import org.apache.parquet.io.LocalOutputFile;
import org.apache.parquet.io.OutputFile;
import org.apache.parquet.schema.MessageType;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

import tablestore.spark.jvm.HadoopFiles;
import tablestore.spark.jvm.TaskErrors;
import tablestore.spark.jvm.mirror.DataFileOut;

/**
 * The JVM twin of one Spark write task's file-store writer (tablestore/spark/write.py's {@code _write_task} with
 * {@code FileStoreWrite(..., bucket=task)}; the reference): the task's rows of one bucket (all of bucket {@code task}
 * when Spark clustered them; one bucket's share of them under {@link BucketFanOut}), in input order, numbered
 * {@code base + 1 + task * stride + i} (i: the row's place among them), buffered until their estimated in-memory
 * size (the Python memtable's estimate: the Arrow size of the row plus 9 bytes) passes write-buffer-size, then
 * sorted by key ({@link KeySort}), the last row of each key kept (input order wins), and written as one sorted run:
 * data files of the file store's format ({@link DataFileOut}: 64k-row row groups, no dictionary, the table's
 * compression) rolling at target-file-size. The commit message names the files ({@link TaskCommits}); Python
 * builds their metadata from the files themselves (filestore.adopt_data_file) when the job commits.
 */
final class BucketRunWriter implements DataWriter<InternalRow> {
    private static final int PAGE = 8 << 20;
    private static final int PAGE_SIZE = 1 << 20;   // Parquet pages (pyarrow's default too)
    /** log2 of the rows per key range that a flush sorts at a time ({@link #partition}). */
    private static final int RANGE_BITS = 12;
    /** The most bytes of rows a run buffers (a flush copies them into one array), whatever write-buffer-size is. */
    private static final long MAX_RUN_BYTES = 1L << 30;

    private final WritePlan plan;
    private final StructType input;
    private final int task;
    private final int bucket;
    private final String dir;
    private final long firstSequence;
    private final int keyOrdinal;
    private final int keyType;
    private final int fixedBytes;
    private final int[] varOrdinals;
    private final int[] requiredOrdinals;
    private final String writerId = java.util.UUID.randomUUID().toString().replace("-", "");
    private final List<String> files = new ArrayList<>();
    private final List<byte[]> pages = new ArrayList<>();
    private UnsafeProjection toUnsafe;
    private FileSystem fs;
    private CodecFactory codecs;
    private ParquetProperties props;
    private MessageType schema;
    private int page;
    private int pos;
    private long[] keys = new long[1 << 16];
    private long[] addresses = new long[1 << 16];
    private int[] sizes = new int[1 << 16];
    private int n;
    private long bytes;
    private long before;   // rows of the task in runs already written
    private long stored;   // bytes of the buffered rows
    private byte[] sortedRows;
    private long[] sortedKeys;
    private int[] sortedInput;
    private int[] sortedOffsets;
    private int[] sortedSizes;
    private long touched;   // what touch() read: kept, so that the reads are not optimised away

    BucketRunWriter(WritePlan plan, StructType input, int task) {
        this(plan, input, task, task);
        if (task >= plan.bucketDirs.length) {
            throw new IllegalStateException("table " + plan.table + ": write task " + task + " has no bucket (the "
                + "table has " + plan.bucketDirs.length + "): Spark did not cluster the rows one bucket per task");
        }
    }

    /** The writer of task {@code task}'s rows of bucket {@code bucket}. */
    BucketRunWriter(WritePlan plan, StructType input, int task, int bucket) {
        this.plan = plan;
        this.input = input;
        this.task = task;
        this.bucket = bucket;
        this.dir = plan.bucketDirs[Math.min(bucket, plan.bucketDirs.length - 1)];
        this.firstSequence = plan.baseSequences[Math.min(bucket, plan.bucketDirs.length - 1)] + 1
            + task * plan.stride;
        this.keyOrdinal = plan.ordinals[plan.key];
        this.keyType = java.util.List.of("byte", "short", "int", "date", "long").indexOf(plan.types[plan.key]);
        int fixed = 9;   // _SEQUENCE_NUMBER and _VALUE_KIND
        List<Integer> var = new ArrayList<>();
        List<Integer> required = new ArrayList<>();
        for (int i = 0; i < plan.names.length; i++) {
            switch (plan.types[i]) {
                case "boolean": case "byte": fixed += 1; break;
                case "short": fixed += 2; break;
                case "int": case "date": case "float": fixed += 4; break;
                case "long": case "double": fixed += 8; break;
                default: fixed += 4; var.add(plan.ordinals[i]);   // an offset, plus the bytes
            }
            if (i == plan.key) {   // as the Python writer, which checks only the primary key for nulls
                required.add(i);
            }
        }
        this.fixedBytes = fixed;
        this.varOrdinals = var.stream().mapToInt(Integer::intValue).toArray();
        this.requiredOrdinals = required.stream().mapToInt(Integer::intValue).toArray();
    }

    @Override
    public void write(InternalRow row) throws IOException {
        UnsafeRow u;
        if (row instanceof UnsafeRow) {
            u = (UnsafeRow) row;
        } else {
            if (toUnsafe == null) {
                toUnsafe = UnsafeProjection.create(input);
            }
            u = toUnsafe.apply(row);
        }
        for (int i : requiredOrdinals) {
            if (u.isNullAt(plan.ordinals[i])) {
                throw TaskErrors.of("InvalidWriteError", "table '" + plan.table + "': " + (i == plan.key
                    ? "primary-key " : "") + "column '" + plan.names[i] + "' has nulls", null);
            }
        }
        if (n == keys.length) {
            keys = java.util.Arrays.copyOf(keys, 2 * n);
            addresses = java.util.Arrays.copyOf(addresses, 2 * n);
            sizes = java.util.Arrays.copyOf(sizes, 2 * n);
        }
        keys[n] = key(u);
        int size = u.getSizeInBytes();
        addresses[n] = store(u, size);
        sizes[n] = size;
        n++;
        long estimate = fixedBytes;
        for (int o : varOrdinals) {
            if (!u.isNullAt(o)) {
                estimate += (int) u.getLong(o);   // a variable-length field's offset and size: its size
            }
        }
        bytes += estimate;
        stored += size;
        if (bytes >= plan.writeBufferSize || stored >= MAX_RUN_BYTES) {
            flush();
        }
    }

    /** The estimated in-memory size of the rows buffered (what write-buffer-size bounds). */
    long buffered() {
        return bytes;
    }

    int bucket() {
        return bucket;
    }

    /** The rows written so far (in runs and buffered). */
    long rows() {
        return before + n;
    }

    List<String> files() {
        return files;
    }

    private long key(UnsafeRow u) {
        switch (keyType) {
            case 0: return u.getByte(keyOrdinal);
            case 1: return u.getShort(keyOrdinal);
            case 2: case 3: return u.getInt(keyOrdinal);
            default: return u.getLong(keyOrdinal);
        }
    }

    /** Copies the row into the pages; its address: page << 32 | offset. */
    private long store(UnsafeRow u, int size) {
        if (page < pages.size() && pos + size > pages.get(page).length) {
            page++;
            pos = 0;
        }
        if (page == pages.size()) {
            pages.add(new byte[Math.max(PAGE, size)]);
        } else if (pages.get(page).length < size) {   // a page of an earlier run, too small for this row
            pages.set(page, new byte[Math.max(PAGE, size)]);
        }
        u.writeToMemory(pages.get(page), Platform.BYTE_ARRAY_OFFSET + pos);
        long address = ((long) page << 32) | pos;
        pos += size;
        return address;
    }

    /**
     * Writes the buffered rows as one sorted run. The rows are first moved, in one sequential pass, into ranges of
     * their key's high bits (a stable radix partition, {@link #partition}); each range (a few thousand rows, held in
     * the CPU's cache) is then sorted ({@link KeySort}) and written: reading the rows in key order straight from
     * the input-order buffer would miss the cache on every row.
     */
    void flush() throws IOException {
        if (n == 0) {
            return;
        }
        if (before + n > plan.stride) {
            throw new IllegalStateException("table '" + plan.table + "': task " + task + " wrote more than "
                + plan.stride + " rows into bucket " + bucket + ": use more input partitions");
        }
        int[] ends = partition();
        long bytesPerRow = Math.max(1, bytes / n);
        int rowsPerFile = (int) Math.max(1, Math.min(Integer.MAX_VALUE, plan.targetFileSize / bytesPerRow));
        UnsafeRow row = new UnsafeRow(plan.ordinals.length);
        DataFileOut writer = null;
        int inFile = 0;
        try {
            int start = 0;
            for (int end : ends) {
                if (end == start) {
                    continue;
                }
                touch(sortedOffsets[start], sortedOffsets[end - 1] + sortedSizes[end - 1]);
                KeySort sorted = KeySort.of(sortedKeys, start, end);
                for (int w : sorted.lastOfEachKey()) {
                    int p = start + sorted.rows[w];
                    if (writer == null) {
                        writer = newFile();
                        inFile = 0;
                    }
                    row.pointTo(sortedRows, Platform.BYTE_ARRAY_OFFSET + sortedOffsets[p], sortedSizes[p]);
                    writer.write(row, firstSequence + before + sortedInput[p]);
                    if (++inFile == rowsPerFile) {
                        writer.close();
                        writer = null;
                    }
                }
                start = end;
            }
        } finally {
            if (writer != null) {
                writer.close();
            }
        }
        before += n;
        n = 0;
        bytes = 0;
        stored = 0;
        page = 0;
        pos = 0;
    }

    /**
     * Reads {@code sortedRows[from, to)} (a key range's rows) in order, a word per cache line: the range then sits
     * in the CPU's cache when it is written in key order (read straight from memory, every row was a cache miss,
     * a fifth of the write stage).
     */
    private void touch(int from, int to) {
        long sum = 0;
        for (long at = Platform.BYTE_ARRAY_OFFSET + from, end = Platform.BYTE_ARRAY_OFFSET + to; at < end; at += 64) {
            sum += Platform.getByte(sortedRows, at);
        }
        touched += sum;
    }

    /**
     * Moves the buffered rows into {@link #sortedRows} grouped by the high bits of their key above the buffer's
     * smallest (about {@link #RANGE_ROWS} rows per group when the keys spread evenly), each group in input order,
     * with their keys, sizes, offsets and input positions; returns the end of each group.
     */
    private int[] partition() {
        long min = keys[0];
        long max = keys[0];
        long total = 0;
        for (int i = 0; i < n; i++) {
            min = Math.min(min, keys[i]);
            max = Math.max(max, keys[i]);
            total += sizes[i];
        }
        int digits = Math.max(0, Math.min(16, 31 - Integer.numberOfLeadingZeros(n) - RANGE_BITS));
        int span = 64 - Long.numberOfLeadingZeros(max - min);   // bits of the key range (unsigned)
        int shift = Math.max(0, span - digits);
        int groups = span == 0 ? 1 : 1 << Math.min(digits, span);
        int[] rowsAt = new int[groups + 1];
        int[] bytesAt = new int[groups + 1];
        for (int i = 0; i < n; i++) {
            int d = (int) ((keys[i] - min) >>> shift);
            rowsAt[d + 1]++;
            bytesAt[d + 1] += sizes[i];
        }
        for (int d = 0; d < groups; d++) {
            rowsAt[d + 1] += rowsAt[d];
            bytesAt[d + 1] += bytesAt[d];
        }
        if (sortedRows == null || sortedRows.length < total) {
            sortedRows = new byte[(int) Math.max(total, Math.min(Integer.MAX_VALUE - 16, total * 5 / 4))];
        }
        if (sortedKeys == null || sortedKeys.length < n) {
            sortedKeys = new long[keys.length];
            sortedInput = new int[keys.length];
            sortedOffsets = new int[keys.length];
            sortedSizes = new int[keys.length];
        }
        int[] ends = java.util.Arrays.copyOfRange(rowsAt, 1, groups + 1);
        for (int i = 0; i < n; i++) {
            int d = (int) ((keys[i] - min) >>> shift);
            int p = rowsAt[d]++;
            int at = bytesAt[d];
            int size = sizes[i];
            bytesAt[d] = at + size;
            long address = addresses[i];
            System.arraycopy(pages.get((int) (address >>> 32)), (int) address, sortedRows, at, size);
            sortedKeys[p] = keys[i];
            sortedInput[p] = i;
            sortedOffsets[p] = at;
            sortedSizes[p] = size;
        }
        return ends;
    }

    private DataFileOut newFile() throws IOException {
        if (codecs == null) {
            codecs = new CodecFactory(new Configuration(false), PAGE_SIZE);
            props = ParquetProperties.builder()
                .withPageSize(PAGE_SIZE)
                .withDictionaryEncoding(false)
                .withWriterVersion(ParquetProperties.WriterVersion.PARQUET_1_0)
                .withPageWriteChecksumEnabled(false)
                .withSizeStatisticsEnabled(false)
                // its own values-writer factory: build() hands the factory its properties, and the default one
                // is shared by every Parquet writer of the JVM (a Spark Parquet write running alongside)
                .withValuesWriterFactory(new DefaultValuesWriterFactory())
                .build();
            schema = DataFileOut.schema(plan.names, plan.types);
        }
        String name = "data-" + writerId + "-" + files.size() + ".parquet";
        OutputFile out = outputFile(name);
        files.add(name);
        return new DataFileOut(out, plan.types, plan.ordinals, schema, props,
            codecs.getCompressor(codec(plan.compression)));
    }

    /**
     * A new data file of the bucket: a local file, or a file of Hadoop's file system of the bucket's URL (S3A: a
     * data file's name is unique and it is written once, so a plain create does; it appears when closed).
     */
    private OutputFile outputFile(String name) throws IOException {
        if (!HadoopFiles.remote(dir)) {
            java.nio.file.Path path = Paths.get(dir, name);
            Files.createDirectories(path.getParent());
            return new LocalOutputFile(path);
        }
        if (fs == null) {
            fs = HadoopFiles.open(dir, plan.hadoop);
        }
        return HadoopOutputFile.fromPath(new Path(dir + "/" + name), fs.getConf());
    }

    static CompressionCodecName codec(String compression) {
        switch (compression) {
            case "lz4": return CompressionCodecName.LZ4_RAW;
            case "zstd": return CompressionCodecName.ZSTD;
            case "snappy": return CompressionCodecName.SNAPPY;
            case "gzip": return CompressionCodecName.GZIP;
            case "none": return CompressionCodecName.UNCOMPRESSED;
            default: throw new IllegalArgumentException("compression " + compression);
        }
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
        flush();
        return TaskCommits.of(task, List.of(this));
    }

    @Override
    public void abort() throws IOException {
        for (String name : files) {
            if (HadoopFiles.remote(dir)) {
                HadoopFiles.open(dir, plan.hadoop).delete(new Path(dir + "/" + name), false);
            } else {
                Files.deleteIfExists(Paths.get(dir, name));
            }
        }
    }

    @Override
    public void close() {
        if (codecs != null) {
            codecs.release();
            codecs = null;
        }
        pages.clear();
        sortedRows = null;
        sortedKeys = null;
        keys = null;
        addresses = null;
        sizes = null;
    }
}
