package tablestore.spark.jvm.write;

import java.io.Closeable;
import java.io.IOException;
import java.util.HashMap;

import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.ColumnWriteStore;
import org.apache.parquet.column.ColumnWriter;
import org.apache.parquet.column.ParquetProperties;
import org.apache.parquet.compression.CompressionCodecFactory;
import org.apache.parquet.hadoop.ColumnChunkPageWriteStore;
import org.apache.parquet.hadoop.ParquetFileWriter;
import org.apache.parquet.io.LocalOutputFile;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.schema.LogicalTypeAnnotation;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName;
import org.apache.parquet.schema.Types;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One data file of the file store's format (filestore/datafile.py): {@code _SEQUENCE_NUMBER} int64,
 * {@code _VALUE_KIND} int8 (Parquet INT32 annotated INT(8)), then the table's columns in table order, every one
 * optional (the Parquet schema the Python writer's Arrow records give: their fields are all nullable); row groups of
 * {@link BucketRunWriter#ROW_GROUP_ROWS} rows, no dictionary, Parquet 1.0 pages, statistics. Records go straight to
 * parquet-mr's column writers (what its record writer does under the record-consumer API, less the bookkeeping of
 * nested records that a flat record does not need). Every record is an ADD (kind 0).
 */
final class DataFileOut implements Closeable {
    static final String SEQ = "_SEQUENCE_NUMBER";
    static final String KIND = "_VALUE_KIND";
    private static final String[] TYPES = {"boolean", "byte", "short", "int", "date", "long", "float", "double",
        "string", "binary"};

    private final WritePlan plan;
    private final MessageType schema;
    private final ParquetProperties props;
    private final CompressionCodecFactory.BytesInputCompressor compressor;
    private final ParquetFileWriter file;
    private final int[] codes;
    private ColumnChunkPageWriteStore pages;
    private ColumnWriteStore store;
    private ColumnWriter[] columns;
    private int rows;

    DataFileOut(java.nio.file.Path path, WritePlan plan, MessageType schema, ParquetProperties props,
                CompressionCodecFactory.BytesInputCompressor compressor) throws IOException {
        this.plan = plan;
        this.schema = schema;
        this.props = props;
        this.compressor = compressor;
        this.file = new ParquetFileWriter(new LocalOutputFile(path), schema, ParquetFileWriter.Mode.CREATE,
            Long.MAX_VALUE, 0, props.getColumnIndexTruncateLength(), props.getStatisticsTruncateLength(),
            props.getPageWriteChecksumEnabled());
        this.codes = new int[plan.types.length];
        for (int i = 0; i < codes.length; i++) {
            codes[i] = java.util.Arrays.asList(TYPES).indexOf(plan.types[i]);
        }
        file.start();
    }

    /** The Parquet schema of a table's data files. */
    static MessageType schema(WritePlan plan) {
        Types.MessageTypeBuilder b = Types.buildMessage();
        b.optional(PrimitiveTypeName.INT64).named(SEQ);
        b.optional(PrimitiveTypeName.INT32).as(LogicalTypeAnnotation.intType(8, true)).named(KIND);
        for (int i = 0; i < plan.names.length; i++) {
            String name = plan.names[i];
            switch (plan.types[i]) {
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
                default: throw new IllegalArgumentException("type " + plan.types[i]);
            }
        }
        return b.named("schema");
    }


    private void startRowGroup() {
        pages = new ColumnChunkPageWriteStore(compressor, schema, props.getAllocator(),
            props.getColumnIndexTruncateLength(), props.getPageWriteChecksumEnabled());
        store = props.newColumnWriteStore(schema, pages, pages);
        columns = new ColumnWriter[schema.getColumns().size()];
        int i = 0;
        for (ColumnDescriptor c : schema.getColumns()) {
            columns[i++] = store.getColumnWriter(c);
        }
    }

    private void endRowGroup() throws IOException {
        try {
            file.startBlock(rows);
            store.flush();
            pages.flushToFileWriter(file);
            file.endBlock();
        } finally {
            store.close();
            pages.close();
            store = null;
            pages = null;
            rows = 0;
        }
    }

    /** Appends {@code row} (columns at the plan's ordinals) with sequence number {@code sequence}. */
    void write(UnsafeRow row, long sequence) throws IOException {
        if (store == null) {
            startRowGroup();
        }
        ColumnWriter[] out = columns;
        out[0].write(sequence, 0, 1);
        out[1].write(0, 0, 1);
        int[] ordinals = plan.ordinals;
        for (int i = 0; i < ordinals.length; i++) {
            int o = ordinals[i];
            ColumnWriter c = out[i + 2];
            if (row.isNullAt(o)) {
                c.writeNull(0, 0);
                continue;
            }
            switch (codes[i]) {
                case 0: c.write(row.getBoolean(o), 0, 1); break;
                case 1: c.write((int) row.getByte(o), 0, 1); break;
                case 2: c.write((int) row.getShort(o), 0, 1); break;
                case 3:
                case 4: c.write(row.getInt(o), 0, 1); break;
                case 5: c.write(row.getLong(o), 0, 1); break;
                case 6: c.write(row.getFloat(o), 0, 1); break;
                case 7: c.write(row.getDouble(o), 0, 1); break;
                case 8: c.write(binary(row.getUTF8String(o)), 0, 1); break;
                case 9: c.write(Binary.fromReusedByteArray(row.getBinary(o)), 0, 1); break;
                default: throw new IllegalStateException(plan.types[i]);
            }
        }
        store.endRecord();
        if (++rows == BucketRunWriter.ROW_GROUP_ROWS) {
            endRowGroup();
        }
    }

    private static Binary binary(UTF8String s) {
        Object base = s.getBaseObject();
        if (base instanceof byte[]) {   // the row's own bytes: no copy (the statistics copy what they keep)
            return Binary.fromReusedByteArray((byte[]) base, (int) (s.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET),
                s.numBytes());
        }
        return Binary.fromReusedByteArray(s.getBytes());
    }

    @Override
    public void close() throws IOException {
        if (store != null && rows > 0) {
            endRowGroup();
        }
        file.end(new HashMap<>());
    }
}
