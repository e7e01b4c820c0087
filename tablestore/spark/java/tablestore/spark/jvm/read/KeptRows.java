package tablestore.spark.jvm.read;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Some rows of a column vector, a view: row {@code i} is the vector's row {@code keep[i]} (a raw file's batch
 * without the rows its deletion vector deletes, {@link DeletedRows}). Only flat types are read raw.
 */
final class KeptRows extends ColumnVector {
    private ColumnVector rows;
    private int[] keep;

    KeptRows(DataType type) {
        super(type);
    }

    /** This view over {@code rows}' rows {@code keep} (reused for each batch). */
    KeptRows of(ColumnVector rows, int[] keep) {
        this.rows = rows;
        this.keep = keep;
        return this;
    }

    @Override
    public void close() {
        // the reader's vectors are the reader's to close
    }

    @Override
    public boolean hasNull() {
        return rows.hasNull();
    }

    @Override
    public int numNulls() {
        return rows.numNulls();   // an upper bound; Spark reads it only as hasNull
    }

    @Override
    public boolean isNullAt(int rowId) {
        return rows.isNullAt(keep[rowId]);
    }

    @Override
    public boolean getBoolean(int rowId) {
        return rows.getBoolean(keep[rowId]);
    }

    @Override
    public byte getByte(int rowId) {
        return rows.getByte(keep[rowId]);
    }

    @Override
    public short getShort(int rowId) {
        return rows.getShort(keep[rowId]);
    }

    @Override
    public int getInt(int rowId) {
        return rows.getInt(keep[rowId]);
    }

    @Override
    public long getLong(int rowId) {
        return rows.getLong(keep[rowId]);
    }

    @Override
    public float getFloat(int rowId) {
        return rows.getFloat(keep[rowId]);
    }

    @Override
    public double getDouble(int rowId) {
        return rows.getDouble(keep[rowId]);
    }

    @Override
    public ColumnarArray getArray(int rowId) {
        return rows.getArray(keep[rowId]);
    }

    @Override
    public ColumnarMap getMap(int rowId) {
        return rows.getMap(keep[rowId]);
    }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        return rows.getDecimal(keep[rowId], precision, scale);
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        return rows.getUTF8String(keep[rowId]);
    }

    @Override
    public byte[] getBinary(int rowId) {
        return rows.getBinary(keep[rowId]);
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw new UnsupportedOperationException("raw splits read flat columns only");
    }
}
