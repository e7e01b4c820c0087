package tablestore.spark.jvm.read;

import java.io.IOException;
import java.io.Serializable;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.roaringbitmap.longlong.Roaring64NavigableMap;

import tablestore.spark.jvm.HadoopFiles;
import tablestore.spark.jvm.mirror.DeletionVector;

/**
 * The rows a raw file's deletion vector deletes (a table with deletion vectors, filestore/deletion.py: its plain
 * splits are raw files minus their vectors' positions), left out of the batches Spark's vectorized Parquet reader
 * gives. A file with a vector is read with one more column, Spark's temporary row-index column
 * ({@link #ROW_INDEX}, what {@code _metadata.row_index} reads): the reader fills it with each row's position in its
 * file, from the row group's first row in the footer and, when the column indexes skip pages, the row indexes of
 * the rows read, so positions stay the file's own whatever the predicate skips. Each batch keeps the rows whose
 * position the vector does not hold ({@link KeptRows}), without the row-index column.
 */
final class DeletedRows {
    /** Spark's temporary row-index column (ParquetFileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME). */
    static final String ROW_INDEX = ParquetFileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME();

    private DeletedRows() {
    }

    /** Where a file's vector is: the vector file (path or URL), Delta's offset of its size field, its size. */
    static final class Ref implements Serializable {
        final String path;
        final long offset;
        final int size;

        Ref(String path, long offset, int size) {
            this.path = path;
            this.offset = offset;
            this.size = size;
        }

        /** A raw plan's vector entry (null or JSON null: no vector). */
        static Ref of(JsonNode vector) {
            if (vector == null || vector.isNull()) {
                return null;
            }
            return new Ref(vector.get("path").asText(), vector.get("offset").asLong(), vector.get("size").asInt());
        }
    }

    /** {@code columns} and the row-index column after them (nullable: a column the file lacks may not be required). */
    static StructType withRowIndex(StructType columns) {
        return columns.add(ROW_INDEX, DataTypes.LongType, true);
    }

    /** The positions {@code ref} deletes of data file {@code file}, its size field, magic and CRC checked. */
    static Roaring64NavigableMap read(Ref ref, String file, Map<String, String> hadoop) throws IOException {
        byte[] framed = new byte[ref.size + 8];
        String where = "deletion vector " + ref.path + " at offset " + ref.offset + " of data file " + file;
        Path path = new Path(ref.path);
        try (FSDataInputStream in = path.getFileSystem(HadoopFiles.configuration(hadoop)).open(path)) {
            in.readFully(ref.offset, framed);
        } catch (IOException e) {
            throw new IOException(where + ": " + e, e);
        }
        try {
            return DeletionVector.decodeFramed(framed, ref.size);
        } catch (DeletionVector.FormatException e) {
            throw new IOException(where + ": " + e.getMessage(), e);
        }
    }

    /**
     * {@code batch} (the scan's columns, then the row-index column) without the rows {@code deleted} holds and
     * without the row-index column; {@code reuse}: the last call's vectors, or null.
     */
    static ColumnarBatch kept(ColumnarBatch batch, Roaring64NavigableMap deleted, KeptRows[] reuse) {
        int width = batch.numCols() - 1;
        ColumnVector index = batch.column(width);
        int rows = batch.numRows();
        int[] keep = null;
        int kept = 0;
        for (int r = 0; r < rows; r++) {
            if (deleted.contains(index.getLong(r))) {
                if (keep == null) {
                    keep = new int[rows];
                    for (int i = 0; i < r; i++) {
                        keep[i] = i;
                    }
                    kept = r;
                }
            } else if (keep != null) {
                keep[kept++] = r;
            }
        }
        ColumnVector[] out = new ColumnVector[width];
        for (int c = 0; c < width; c++) {
            if (keep == null) {
                out[c] = batch.column(c);
            } else {
                if (reuse[c] == null) {
                    reuse[c] = new KeptRows(batch.column(c).dataType());
                }
                out[c] = reuse[c].of(batch.column(c), keep);
            }
        }
        return new ColumnarBatch(out, keep == null ? rows : kept);
    }
}
