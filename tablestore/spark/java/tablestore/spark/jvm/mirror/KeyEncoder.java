package tablestore.spark.jvm.mirror;

import java.io.Serializable;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

/**
 * Python owner: {@code filestore/keycodec.py}. The file store's order-preserving key bytes (an on-disk format) of
 * Spark values, for one key field of a table's Arrow type. The Arrow type decides the bytes, not the Spark type
 * that carries the value: a {@code uint8} column arrives as a Spark short and encodes in one byte, a
 * {@code timestamp[ms]} column arrives as Spark microseconds and encodes the stored milliseconds, a {@code date64}
 * the stored milliseconds of the day.
 *
 * <p>Layout (see keycodec.py): a marker byte 0x00 for null (nothing follows) or 0x01, then the payload: integers
 * big-endian with the sign bit flipped (unsigned as they are); floats normalized as the file store writes keys
 * (-0.0 is 0.0), IEEE bits big-endian with the sign bit set for positives and every bit inverted for negatives,
 * every NaN all 0xFF; decimals the unscaled two's complement integer of the type's byte width, sign bit flipped;
 * dates, timestamps as their stored integers; strings and binaries their bytes with 0x00 written 0x00 0xFF, then
 * 0x00 0x00; fixed-size binaries their bytes.
 */
public final class KeyEncoder implements Serializable {
    private static final long serialVersionUID = 1L;

    enum Kind { BOOL, SIGNED, UNSIGNED, FLOAT32, FLOAT64, DECIMAL, DATE32, DATE64, TIMESTAMP, BYTES, FIXED }

    private static final Pattern DECIMAL = Pattern.compile("decimal(32|64|128|256)\\((\\d+),\\s*(\\d+)\\)");
    private static final Pattern TIMESTAMP = Pattern.compile("timestamp\\[(s|ms|us|ns)(,\\s*tz=.*)?\\]");
    private static final Pattern FIXED_BINARY = Pattern.compile("fixed_size_binary\\[(\\d+)\\]");
    private static final long MS_PER_DAY = 86_400_000L;

    private final String arrowType;
    private final Kind kind;
    private final int width;     // payload bytes of a fixed-width kind
    private final int scale;     // decimal scale
    private final long unitsPerMicro;   // timestamp ns: 1000
    private final long microsPerUnit;   // timestamp s: 1_000_000, ms: 1000

    private KeyEncoder(String arrowType, Kind kind, int width, int scale, long unitsPerMicro, long microsPerUnit) {
        this.arrowType = arrowType;
        this.kind = kind;
        this.width = width;
        this.scale = scale;
        this.unitsPerMicro = unitsPerMicro;
        this.microsPerUnit = microsPerUnit;
    }

    private static KeyEncoder of(String arrowType, Kind kind, int width) {
        return new KeyEncoder(arrowType, kind, width, 0, 1, 1);
    }

    /** The encoder of one key field of Arrow type {@code arrowType}, as pyarrow prints it ({@code str(type)}). */
    public static KeyEncoder forArrowType(String arrowType) {
        String t = arrowType.trim();
        switch (t) {
            case "bool": return of(t, Kind.BOOL, 1);
            case "int8": return of(t, Kind.SIGNED, 1);
            case "int16": return of(t, Kind.SIGNED, 2);
            case "int32": return of(t, Kind.SIGNED, 4);
            case "int64": return of(t, Kind.SIGNED, 8);
            case "uint8": return of(t, Kind.UNSIGNED, 1);
            case "uint16": return of(t, Kind.UNSIGNED, 2);
            case "uint32": return of(t, Kind.UNSIGNED, 4);
            case "uint64": return of(t, Kind.UNSIGNED, 8);
            case "float": return of(t, Kind.FLOAT32, 4);
            case "double": return of(t, Kind.FLOAT64, 8);
            case "date32[day]": return of(t, Kind.DATE32, 4);
            case "date64[ms]": return of(t, Kind.DATE64, 8);
            case "string": case "large_string": case "string_view":
            case "binary": case "large_binary": case "binary_view":
                return of(t, Kind.BYTES, 0);
            default:
                break;
        }
        Matcher m = DECIMAL.matcher(t);
        if (m.matches()) {
            return new KeyEncoder(t, Kind.DECIMAL, Integer.parseInt(m.group(1)) / 8, Integer.parseInt(m.group(3)), 1, 1);
        }
        m = TIMESTAMP.matcher(t);
        if (m.matches()) {
            switch (m.group(1)) {
                case "s": return new KeyEncoder(t, Kind.TIMESTAMP, 8, 0, 1, 1_000_000L);
                case "ms": return new KeyEncoder(t, Kind.TIMESTAMP, 8, 0, 1, 1_000L);
                case "us": return new KeyEncoder(t, Kind.TIMESTAMP, 8, 0, 1, 1);
                default: return new KeyEncoder(t, Kind.TIMESTAMP, 8, 0, 1_000L, 1);
            }
        }
        m = FIXED_BINARY.matcher(t);
        if (m.matches()) {
            return of(t, Kind.FIXED, Integer.parseInt(m.group(1)));
        }
        throw new UnsupportedOperationException("tablestore bucket function: no key encoding for the Arrow type "
            + arrowType + " (supported: bool, int8-64, uint8-64, float, double, decimalN(p, s), date32[day], "
            + "date64[ms], timestamp[unit(, tz=...)], string, large_string, binary, large_binary, "
            + "fixed_size_binary[n])");
    }

    public String arrowType() {
        return arrowType;
    }

    /** The Spark type a value of this field arrives as (tablestore/spark/types.py), for binding. */
    public boolean accepts(DataType spark) {
        switch (kind) {
            case BOOL: return spark instanceof BooleanType;
            case SIGNED:
                return width == 1 ? spark instanceof ByteType : width == 2 ? spark instanceof ShortType
                    : width == 4 ? spark instanceof IntegerType : spark instanceof LongType;
            case UNSIGNED:
                return width == 1 ? spark instanceof ShortType : width == 2 ? spark instanceof IntegerType
                    : width == 4 ? spark instanceof LongType
                    : spark instanceof DecimalType && ((DecimalType) spark).scale() == 0;
            case FLOAT32: return spark instanceof FloatType;
            case FLOAT64: return spark instanceof DoubleType;
            case DECIMAL: return spark instanceof DecimalType && ((DecimalType) spark).scale() == scale;
            case DATE32: case DATE64: return spark instanceof DateType;
            case TIMESTAMP: return spark instanceof TimestampType || spark instanceof TimestampNTZType;
            case BYTES: return spark instanceof StringType || spark instanceof BinaryType;
            case FIXED: return spark instanceof BinaryType;
            default: return false;
        }
    }

    /** The Spark type tablestore maps this Arrow type to (tablestore/spark/types.py). */
    public DataType sparkType() {
        switch (kind) {
            case BOOL: return DataTypes.BooleanType;
            case SIGNED:
                return width == 1 ? DataTypes.ByteType : width == 2 ? DataTypes.ShortType
                    : width == 4 ? DataTypes.IntegerType : DataTypes.LongType;
            case UNSIGNED:
                return width == 1 ? DataTypes.ShortType : width == 2 ? DataTypes.IntegerType
                    : width == 4 ? DataTypes.LongType : DataTypes.createDecimalType(20, 0);
            case FLOAT32: return DataTypes.FloatType;
            case FLOAT64: return DataTypes.DoubleType;
            case DECIMAL: {
                Matcher m = DECIMAL.matcher(arrowType);
                m.matches();
                return DataTypes.createDecimalType(Integer.parseInt(m.group(2)), scale);
            }
            case DATE32: case DATE64: return DataTypes.DateType;
            case TIMESTAMP: return arrowType.contains("tz=") ? DataTypes.TimestampType : DataTypes.TimestampNTZType;
            case BYTES: return arrowType.contains("string") ? DataTypes.StringType : DataTypes.BinaryType;
            default: return DataTypes.BinaryType;
        }
    }

    /** Appends the key bytes of field {@code ordinal} of {@code row} (of Spark type {@code type}) to {@code out}. */
    public void encode(InternalRow row, int ordinal, DataType type, Bytes out) {
        if (row.isNullAt(ordinal)) {
            out.add(0x00);
            return;
        }
        out.add(0x01);
        switch (kind) {
            case BOOL:
                out.add(row.getBoolean(ordinal) ? 1 : 0);
                return;
            case SIGNED:
                out.addBigEndian(integral(row, ordinal, type) ^ (1L << (8 * width - 1)), width);
                return;
            case UNSIGNED:
                if (width == 8) {
                    DecimalType dt = (DecimalType) type;   // its precision decides how the row stores the value
                    BigInteger v = row.getDecimal(ordinal, dt.precision(), 0).toJavaBigDecimal().toBigIntegerExact();
                    out.addBigEndian(v.longValue(), 8);   // the low 64 bits: the unsigned value's bits
                } else {
                    out.addBigEndian(integral(row, ordinal, type), width);
                }
                return;
            case FLOAT32: {
                float f = row.getFloat(ordinal);
                if (Float.isNaN(f)) {
                    out.addBigEndian(-1L, 4);
                    return;
                }
                int bits = Float.floatToRawIntBits(f == 0.0f ? 0.0f : f);   // -0.0 is 0.0 (the key normal form)
                out.addBigEndian(bits < 0 ? ~bits : bits | 0x8000_0000, 4);
                return;
            }
            case FLOAT64: {
                double d = row.getDouble(ordinal);
                if (Double.isNaN(d)) {
                    out.addBigEndian(-1L, 8);
                    return;
                }
                long bits = Double.doubleToRawLongBits(d == 0.0 ? 0.0 : d);
                out.addBigEndian(bits < 0 ? ~bits : bits | Long.MIN_VALUE, 8);
                return;
            }
            case DECIMAL: {
                DecimalType dt = (DecimalType) type;
                BigDecimal value = row.getDecimal(ordinal, dt.precision(), dt.scale()).toJavaBigDecimal();
                byte[] twos = value.setScale(scale).unscaledValue().toByteArray();   // exact: the table's scale
                byte[] payload = new byte[width];
                Arrays.fill(payload, twos[0] < 0 ? (byte) 0xFF : 0);   // sign-extended to the type's width
                System.arraycopy(twos, 0, payload, width - twos.length, twos.length);
                payload[0] ^= (byte) 0x80;
                out.add(payload, 0, width);
                return;
            }
            case DATE32:
                out.addBigEndian(row.getInt(ordinal) ^ 0x8000_0000L, 4);
                return;
            case DATE64:
                out.addBigEndian((row.getInt(ordinal) * MS_PER_DAY) ^ Long.MIN_VALUE, 8);
                return;
            case TIMESTAMP: {
                long micros = row.getLong(ordinal);
                long stored = microsPerUnit > 1 ? Math.floorDiv(micros, microsPerUnit) : micros * unitsPerMicro;
                out.addBigEndian(stored ^ Long.MIN_VALUE, 8);
                return;
            }
            case BYTES: {
                byte[] raw = type instanceof StringType ? row.getUTF8String(ordinal).getBytes() : row.getBinary(ordinal);
                for (byte b : raw) {
                    out.add(b);
                    if (b == 0) {
                        out.add(0xFF);
                    }
                }
                out.add(0x00);
                out.add(0x00);
                return;
            }
            case FIXED: {
                byte[] raw = row.getBinary(ordinal);
                if (raw.length != width) {
                    throw new IllegalArgumentException(String.format(Locale.ROOT,
                        "a %s key value of %d bytes", arrowType, raw.length));
                }
                out.add(raw, 0, width);
                return;
            }
            default:
                throw new IllegalStateException(kind.toString());
        }
    }

    private static long integral(InternalRow row, int ordinal, DataType type) {
        if (type instanceof ByteType) {
            return row.getByte(ordinal);
        }
        if (type instanceof ShortType) {
            return row.getShort(ordinal);
        }
        if (type instanceof IntegerType) {
            return row.getInt(ordinal);
        }
        return row.getLong(ordinal);
    }

    /** A growable byte buffer (one per bound function). */
    public static final class Bytes {
        byte[] data = new byte[64];
        int size;

        void clear() {
            size = 0;
        }

        void add(int b) {
            if (size == data.length) {
                data = Arrays.copyOf(data, size * 2);
            }
            data[size++] = (byte) b;
        }

        void add(byte[] bytes, int from, int length) {
            if (size + length > data.length) {
                data = Arrays.copyOf(data, Math.max(size * 2, size + length));
            }
            System.arraycopy(bytes, from, data, size, length);
            size += length;
        }

        void addBigEndian(long value, int bytes) {
            for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) {
                add((int) (value >>> shift) & 0xFF);
            }
        }
    }
}
