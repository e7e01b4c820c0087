package tablestore.spark.jvm.mirror;

import java.io.Closeable;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HashMap;

import org.apache.parquet.bytes.BytesInput;
import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.Encoding;
import org.apache.parquet.column.ParquetProperties;
import org.apache.parquet.column.page.PageWriter;
import org.apache.parquet.column.statistics.BooleanStatistics;
import org.apache.parquet.column.statistics.DoubleStatistics;
import org.apache.parquet.column.statistics.FloatStatistics;
import org.apache.parquet.column.statistics.IntStatistics;
import org.apache.parquet.column.statistics.LongStatistics;
import org.apache.parquet.column.statistics.Statistics;
import org.apache.parquet.column.values.rle.RunLengthBitPackingHybridValuesWriter;
import org.apache.parquet.compression.CompressionCodecFactory;
import org.apache.parquet.hadoop.ColumnChunkPageWriteStore;
import org.apache.parquet.hadoop.ParquetFileWriter;
import org.apache.parquet.io.OutputFile;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.schema.LogicalTypeAnnotation;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName;
import org.apache.parquet.schema.Types;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;

/**
 * Python owner: {@code filestore/datafile.py}. One data file of the file store's format: {@code _SEQUENCE_NUMBER}
 * int64, {@code _VALUE_KIND} int8 (Parquet INT32 annotated INT(8)), then the table's columns in table order, every
 * one optional (the Parquet schema the Python writer's Arrow records give: their fields are all nullable); row
 * groups of {@link #ROW_GROUP_ROWS} rows, Parquet 1.0 data pages of at most {@link #PAGE_ROWS} rows and about
 * {@link #PAGE_BYTES} bytes, PLAIN values (no dictionary), RLE definition levels, page and column statistics and
 * page indexes as parquet-mr computes them (its {@link Statistics} classes). Every record is an ADD (kind 0).
 *
 * <p>The pages are encoded here, each column's values appended to its page buffer as a row comes, and handed to
 * parquet-mr's page store ({@link ColumnChunkPageWriteStore}: compression, page headers, column and offset
 * indexes, the footer): parquet-mr's own column writers spent several virtual calls, a level encoder and a size
 * check per value.
 *
 * <p>The table's columns come as plain values (names, the JVM writer's type names of
 * tablestore/spark/jvm_write.py, the input row's ordinal of each), so that this class needs nothing else of the jar.
 */
public final class DataFileOut implements Closeable {
    /** filestore/datafile.py's ROW_GROUP_ROWS: rows per row group, all but a file's last group exactly that many. */
    public static final int ROW_GROUP_ROWS = 65_536;
    static final String SEQ = Contract.SEQUENCE_COLUMN;
    static final String KIND = Contract.VALUE_KIND_COLUMN;
    /** parquet-mr's default page limits (ParquetProperties): rows, and bytes of values. */
    static final int PAGE_ROWS = 20_000;
    static final int PAGE_BYTES = 1 << 20;
    private static final String[] TYPES = {"boolean", "byte", "short", "int", "date", "long", "float", "double",
        "string", "binary"};
    private static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class,
        ByteOrder.LITTLE_ENDIAN);

    private final String[] types;
    private final int[] ordinals;
    private final MessageType schema;
    private final ParquetProperties props;
    private final CompressionCodecFactory.BytesInputCompressor compressor;
    private final ParquetFileWriter file;
    private final int[] codes;
    private final Column[] columns;
    private ColumnChunkPageWriteStore pages;
    private int rows;

    /**
     * A new data file at {@code out} of {@link #schema(String[], String[])}'s {@code schema}: table column i has
     * the type name {@code types[i]} and is the input row's column {@code ordinals[i]}.
     */
    public DataFileOut(OutputFile out, String[] types, int[] ordinals, MessageType schema, ParquetProperties props,
                       CompressionCodecFactory.BytesInputCompressor compressor) throws IOException {
        this.types = types.clone();
        this.ordinals = ordinals.clone();
        this.schema = schema;
        this.props = props;
        this.compressor = compressor;
        this.file = new ParquetFileWriter(out, schema, ParquetFileWriter.Mode.CREATE,
            Long.MAX_VALUE, 0, props.getColumnIndexTruncateLength(), props.getStatisticsTruncateLength(),
            props.getPageWriteChecksumEnabled());
        this.codes = new int[types.length];
        for (int i = 0; i < codes.length; i++) {
            codes[i] = Arrays.asList(TYPES).indexOf(types[i]);
        }
        this.columns = new Column[schema.getColumns().size()];
        for (int i = 0; i < columns.length; i++) {
            columns[i] = new Column(schema.getColumns().get(i));
        }
        file.start();
    }

    /** The Parquet schema of the data files of a table of columns {@code names} of the type names {@code types}. */
    public static MessageType schema(String[] names, String[] types) {
        Types.MessageTypeBuilder b = Types.buildMessage();
        b.optional(PrimitiveTypeName.INT64).named(SEQ);
        b.optional(PrimitiveTypeName.INT32).as(LogicalTypeAnnotation.intType(8, true)).named(KIND);
        for (int i = 0; i < names.length; i++) {
            String name = names[i];
            switch (types[i]) {
                case "boolean": b.optional(PrimitiveTypeName.BOOLEAN).named(name); break;
                case "byte": b.optional(PrimitiveTypeName.INT32).as(LogicalTypeAnnotation.intType(8, true))
                    .named(name); break;
                case "short": b.optional(PrimitiveTypeName.INT32).as(LogicalTypeAnnotation.intType(16, true))
                    .named(name); break;
                case "int": b.optional(PrimitiveTypeName.INT32).named(name); break;
                case "date": b.optional(PrimitiveTypeName.INT32).as(LogicalTypeAnnotation.dateType())
                    .named(name); break;
                case "long": b.optional(PrimitiveTypeName.INT64).named(name); break;
                case "float": b.optional(PrimitiveTypeName.FLOAT).named(name); break;
                case "double": b.optional(PrimitiveTypeName.DOUBLE).named(name); break;
                case "string": b.optional(PrimitiveTypeName.BINARY).as(LogicalTypeAnnotation.stringType())
                    .named(name); break;
                case "binary": b.optional(PrimitiveTypeName.BINARY).named(name); break;
                default: throw new IllegalArgumentException("type " + types[i]);
            }
        }
        return b.named("schema");
    }

    /** Appends {@code row} (the table's columns at their ordinals) with sequence number {@code sequence}. */
    public void write(UnsafeRow row, long sequence) throws IOException {
        if (pages == null) {
            pages = new ColumnChunkPageWriteStore(compressor, schema, props.getAllocator(),
                props.getColumnIndexTruncateLength(), props.getPageWriteChecksumEnabled());
            for (Column c : columns) {
                c.start(pages);
            }
        }
        Column[] out = columns;
        out[0].writeLong(sequence);
        out[1].writeInt(0);
        int[] ordinals = this.ordinals;
        for (int i = 0; i < ordinals.length; i++) {
            int o = ordinals[i];
            Column c = out[i + 2];
            if (row.isNullAt(o)) {
                c.writeNull();
                continue;
            }
            switch (codes[i]) {
                case 0: c.writeBoolean(row.getBoolean(o)); break;
                case 1: c.writeInt(row.getByte(o)); break;
                case 2: c.writeInt(row.getShort(o)); break;
                case 3:
                case 4: c.writeInt(row.getInt(o)); break;
                case 5: c.writeLong(row.getLong(o)); break;
                case 6: c.writeFloat(row.getFloat(o)); break;
                case 7: c.writeDouble(row.getDouble(o)); break;
                case 8:
                case 9: {
                    long offsetAndSize = row.getLong(o);
                    c.writeBytes(row.getBaseObject(), row.getBaseOffset() + (offsetAndSize >>> 32),
                        (int) offsetAndSize);
                    break;
                }
                default: throw new IllegalStateException(types[i]);
            }
        }
        if (++rows == ROW_GROUP_ROWS) {
            endRowGroup();
        }
    }

    private void endRowGroup() throws IOException {
        try {
            for (Column c : columns) {
                c.flushPage();
            }
            file.startBlock(rows);
            pages.flushToFileWriter(file);
            file.endBlock();
        } finally {
            pages.close();
            pages = null;
            rows = 0;
        }
    }

    @Override
    public void close() throws IOException {
        try {
            if (pages != null && rows > 0) {
                endRowGroup();
            }
            file.end(new HashMap<>());
        } finally {
            for (Column c : columns) {
                c.close();
            }
        }
    }

    /**
     * One column's current page: its PLAIN values, its definition levels (while every value is there, only their
     * count: one RLE run), its statistics.
     */
    private final class Column {
        final ColumnDescriptor descriptor;
        final boolean binary;
        PageWriter out;
        Statistics<?> stats;
        byte[] values = new byte[1 << 16];
        int size;
        int count;
        int present;
        RunLengthBitPackingHybridValuesWriter levels;
        boolean leveled;   // the page has a null: its levels are written one by one to levels
        int minAt = -1;
        int minLength;
        int maxAt = -1;
        int maxLength;

        Column(ColumnDescriptor descriptor) {
            this.descriptor = descriptor;
            this.binary = descriptor.getPrimitiveType().getPrimitiveTypeName() == PrimitiveTypeName.BINARY;
            this.stats = Statistics.createStats(descriptor.getPrimitiveType());
        }

        void start(ColumnChunkPageWriteStore store) {
            out = store.getPageWriter(descriptor);
        }

        private void room(int bytes) {
            if (size + bytes > values.length) {
                values = Arrays.copyOf(values, Math.max(values.length * 2, size + bytes));
            }
        }

        private void present() throws IOException {
            if (leveled) {
                levels.writeInteger(1);
            }
            count++;
            present++;
            if (count == PAGE_ROWS || size >= PAGE_BYTES) {
                flushPage();
            }
        }

        void writeNull() throws IOException {
            if (!leveled) {
                if (levels == null) {
                    levels = new RunLengthBitPackingHybridValuesWriter(1, 1 << 12, PAGE_BYTES,
                        props.getAllocator());
                }
                for (int i = 0; i < count; i++) {   // the page's values so far: all there
                    levels.writeInteger(1);
                }
                leveled = true;
            }
            levels.writeInteger(0);
            stats.incrementNumNulls();
            count++;
            if (count == PAGE_ROWS) {
                flushPage();
            }
        }

        void writeBoolean(boolean v) throws IOException {
            room(1);
            int bit = present & 7;
            if (bit == 0) {
                values[size++] = 0;
            }
            if (v) {
                values[size - 1] |= (byte) (1 << bit);
            }
            ((BooleanStatistics) stats).updateStats(v);
            present();
        }

        void writeInt(int v) throws IOException {
            room(4);
            INT.set(values, size, v);
            size += 4;
            ((IntStatistics) stats).updateStats(v);
            present();
        }

        void writeLong(long v) throws IOException {
            room(8);
            LONG.set(values, size, v);
            size += 8;
            ((LongStatistics) stats).updateStats(v);
            present();
        }

        void writeFloat(float v) throws IOException {
            room(4);
            INT.set(values, size, Float.floatToRawIntBits(v));
            size += 4;
            ((FloatStatistics) stats).updateStats(v);
            present();
        }

        void writeDouble(double v) throws IOException {
            room(8);
            LONG.set(values, size, Double.doubleToRawLongBits(v));
            size += 8;
            ((DoubleStatistics) stats).updateStats(v);
            present();
        }

        /** A string or binary value: {@code length} bytes at {@code base, offset} (Spark's unsafe addressing). */
        void writeBytes(Object base, long offset, int length) throws IOException {
            room(4 + length);
            INT.set(values, size, length);
            int at = size + 4;
            Platform.copyMemory(base, offset, values, Platform.BYTE_ARRAY_OFFSET + at, length);
            size = at + length;
            // the page's min and max (unsigned lexicographic, Parquet's order of strings and binaries), by place
            if (minAt < 0 || Arrays.compareUnsigned(values, at, at + length, values, minAt, minAt + minLength) < 0) {
                minAt = at;
                minLength = length;
            }
            if (maxAt < 0 || Arrays.compareUnsigned(values, at, at + length, values, maxAt, maxAt + maxLength) > 0) {
                maxAt = at;
                maxLength = length;
            }
            present();
        }

        void flushPage() throws IOException {
            if (count == 0) {
                return;
            }
            if (binary && minAt >= 0) {   // the page's values are copied: the buffer is reused
                stats.updateStats(Binary.fromConstantByteArray(Arrays.copyOfRange(values, minAt, minAt + minLength)));
                stats.updateStats(Binary.fromConstantByteArray(Arrays.copyOfRange(values, maxAt, maxAt + maxLength)));
            }
            BytesInput definitions = leveled ? levels.getBytes() : BytesInput.from(allPresent(count));
            out.writePage(BytesInput.concat(definitions, BytesInput.from(values, 0, size)), count, count, stats,
                Encoding.BIT_PACKED, Encoding.RLE, Encoding.PLAIN);
            stats = Statistics.createStats(descriptor.getPrimitiveType());
            if (leveled) {
                levels.reset();
                leveled = false;
            }
            size = 0;
            count = 0;
            present = 0;
            minAt = -1;
            maxAt = -1;
        }

        void close() {
            if (levels != null) {
                levels.close();
                levels = null;
            }
        }
    }

    /**
     * The definition levels of {@code count} values that are all there (maximum level 1): the 4-byte length, then
     * one RLE run (its header, the count shifted left by one as a ULEB128 varint, then the level in one byte).
     */
    static byte[] allPresent(int count) {
        byte[] run = new byte[4 + 5 + 1];
        int at = 4;
        int header = count << 1;
        while ((header & ~0x7F) != 0) {
            run[at++] = (byte) ((header & 0x7F) | 0x80);
            header >>>= 7;
        }
        run[at++] = (byte) header;
        run[at++] = 1;
        INT.set(run, 0, at - 4);
        return Arrays.copyOf(run, at);
    }
}
