package tablestore.spark.jvm.mirror;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Python owner: {@code filestore/bucket.py}. The JVM twin of the file store's bucket function (an on-disk
 * contract): for a table whose bucket key has the Arrow types {@code keyTypes} and {@code numBuckets} buckets,
 * the bucket of a row is
 * <pre>  siphash-2-4(key bytes, key "0123456789123456") -> pandas' 64-bit mix -> unsigned mod numBuckets</pre>
 * where the key bytes are {@link KeyEncoder}'s (filestore/keycodec.py). A differential test
 * (tests/tablestore/spark/test_spark_bucket_function.py) holds it to {@code filestore.bucket_of}.
 *
 * <p>As a Spark V2 function: an {@link UnboundFunction} that binds to the key columns (in key order, of the Spark
 * types tablestore maps the Arrow types to) and returns the bucket as an int. A catalog that is a
 * {@code FunctionCatalog} returns it from {@code loadFunction} for the name {@link #name(List, int)} (which
 * carries the types and the bucket count: {@link #fromName(String)} reads them back), and names it in its write's
 * required distribution, e.g. {@code Distributions.clustered(new Expression[]{ partition columns...,
 * Expressions.apply(BucketFunction.name(types, n), Expressions.column(k1), ...) })}: Spark then computes the
 * bucket once per row, in the JVM, and sends each (partition, bucket) to one task.
 */
public final class BucketFunction implements UnboundFunction {
    private static final long serialVersionUID = 1L;
    /** The prefix of every bucket function name: {@code tablestore_bucket:<numBuckets>:<type>|<type>...}. */
    public static final String PREFIX = Contract.BUCKET_FUNCTION_PREFIX;

    private final List<String> keyTypes;
    private final int numBuckets;

    public BucketFunction(List<String> keyTypes, int numBuckets) {
        if (numBuckets < 1) {
            throw new IllegalArgumentException("numBuckets must be at least 1, not " + numBuckets);
        }
        if (keyTypes.isEmpty()) {
            throw new IllegalArgumentException("a bucket key needs at least one column");
        }
        this.keyTypes = List.copyOf(keyTypes);
        this.numBuckets = numBuckets;
        encoders();   // fails now on a type without a key encoding
    }

    /** The function name of a table's bucket function: {@code tablestore_bucket:4:int64|string}. */
    public static String name(List<String> keyTypes, int numBuckets) {
        return PREFIX + ":" + numBuckets + ":" + String.join("|", keyTypes);
    }

    /** Whether {@code name} is a bucket function's name (see {@link #name(List, int)}). */
    public static boolean isBucketFunctionName(String name) {
        return name.startsWith(PREFIX + ":");
    }

    /** The function named {@code name} (see {@link #name(List, int)}). */
    public static BucketFunction fromName(String name) {
        String[] parts = name.split(":", 3);
        if (parts.length != 3 || !parts[0].equals(PREFIX)) {
            throw new IllegalArgumentException("not a tablestore bucket function name: " + name);
        }
        return new BucketFunction(Arrays.asList(parts[2].split("\\|")), Integer.parseInt(parts[1]));
    }

    private KeyEncoder[] encoders() {
        KeyEncoder[] out = new KeyEncoder[keyTypes.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = KeyEncoder.forArrowType(keyTypes.get(i));
        }
        return out;
    }

    /** The Spark types of the key columns the function binds to, in key order. */
    public StructType inputType() {
        KeyEncoder[] encoders = encoders();
        List<StructField> fields = new ArrayList<>();
        for (int i = 0; i < encoders.length; i++) {
            fields.add(DataTypes.createStructField("k" + i, encoders[i].sparkType(), true));
        }
        return DataTypes.createStructType(fields);
    }

    @Override
    public BoundFunction bind(StructType inputType) {
        KeyEncoder[] encoders = encoders();
        StructField[] fields = inputType.fields();
        if (fields.length != encoders.length) {
            throw new UnsupportedOperationException(String.format("%s takes the %d key columns (%s), not %d",
                name(), encoders.length, String.join(", ", keyTypes), fields.length));
        }
        DataType[] types = new DataType[fields.length];
        for (int i = 0; i < fields.length; i++) {
            types[i] = fields[i].dataType();
            if (!encoders[i].accepts(types[i])) {
                throw new UnsupportedOperationException(String.format(
                    "%s: key column %d (%s) has the Spark type %s, expected %s for the Arrow type %s", name(), i,
                    fields[i].name(), types[i].simpleString(), encoders[i].sparkType().simpleString(),
                    keyTypes.get(i)));
            }
        }
        return fields.length == 1 && !fields[0].nullable() ? new OneColumn(name(), encoders, types, numBuckets)
            : new Bound(name(), encoders, types, numBuckets);
    }

    @Override
    public String description() {
        return name() + ": the tablestore bucket of a key (filestore/bucket.py)";
    }

    @Override
    public String name() {
        return name(keyTypes, numBuckets);
    }

    /** The bound function: the bucket (int, never null) of the key columns of a row. */
    public static class Bound implements ScalarFunction<Integer>, Serializable {
        private static final long serialVersionUID = 1L;
        private final String name;
        private final KeyEncoder[] encoders;
        private final DataType[] types;
        private final int numBuckets;
        private transient KeyEncoder.Bytes buffer;

        Bound(String name, KeyEncoder[] encoders, DataType[] types, int numBuckets) {
            this.name = name;
            this.encoders = encoders;
            this.types = types;
            this.numBuckets = numBuckets;
        }

        @Override
        public Integer produceResult(InternalRow input) {
            return bucket(input);
        }

        /** The bucket of the key in {@code input} (its fields are the key columns, in key order). */
        public int bucket(InternalRow input) {
            if (buffer == null) {
                buffer = new KeyEncoder.Bytes();
            }
            KeyEncoder.Bytes key = buffer;
            key.clear();
            for (int i = 0; i < encoders.length; i++) {
                encoders[i].encode(input, i, types[i], key);
            }
            return bucketOf(key.data, key.size, numBuckets);
        }

        @Override
        public DataType[] inputTypes() {
            return types.clone();
        }

        @Override
        public DataType resultType() {
            return DataTypes.IntegerType;
        }

        @Override
        public boolean isResultNullable() {
            return false;
        }

        @Override
        public boolean isDeterministic() {
            return true;
        }

        @Override
        public String canonicalName() {
            return name;   // equal names, equal functions: Spark may match two distributions by it
        }

        @Override
        public String name() {
            return name;
        }
    }

    /**
     * The bound function of a one-column key that is never null, with Spark's magic methods: a key whose Spark
     * type's Java class is one of theirs is called compiled ({@code Invoke}) instead of through produceResult (an
     * argument row and a boxed result per row). The same bucket: the encoders still read the value by the declared
     * type (a date is an int, a timestamp a long). Not offered for a nullable column: Spark would hand a null to a
     * primitive parameter as its default value.
     */
    public static final class OneColumn extends Bound {
        private static final long serialVersionUID = 1L;
        private transient GenericInternalRow one;

        OneColumn(String name, KeyEncoder[] encoders, DataType[] types, int numBuckets) {
            super(name, encoders, types, numBuckets);
        }

        @Override
        public Integer produceResult(InternalRow input) {
            return bucket(input);   // declared here too: Spark looks for it on the function's own class
        }

        /** The bucket of a one-column key held as a Java long (bigint, timestamp). */
        public int invoke(long key) {
            return bucket(one(key));
        }

        /** The bucket of a one-column key held as a Java int (int, date). */
        public int invoke(int key) {
            return bucket(one(key));
        }

        /** The bucket of a one-column string key. */
        public int invoke(UTF8String key) {
            return bucket(one(key));
        }

        private InternalRow one(Object key) {
            if (one == null) {
                one = new GenericInternalRow(1);
            }
            one.update(0, key);
            return one;
        }
    }

    // -- the hash (pandas.util.hash_array of the key bytes: SipHash-2-4 then pandas' mix) -----------------------

    private static final long K0 = littleEndianLong("01234567".getBytes(java.nio.charset.StandardCharsets.US_ASCII), 0, 8);
    private static final long K1 = littleEndianLong("89123456".getBytes(java.nio.charset.StandardCharsets.US_ASCII), 0, 8);

    /** The bucket of encoded key bytes {@code key[0, length)}. */
    public static int bucketOf(byte[] key, int length, int numBuckets) {
        return (int) Long.remainderUnsigned(hash(key, length), numBuckets);
    }

    /** pandas' {@code hash_array} of one bytes value, as a uint64 in a long. */
    public static long hash(byte[] key, int length) {
        long h = sipHash24(key, length);
        h ^= h >>> 30;
        h *= 0xBF58476D1CE4E5B9L;
        h ^= h >>> 27;
        h *= 0x94D049BB133111EBL;
        h ^= h >>> 31;
        return h;
    }

    /** A long of 8 bytes in little-endian order, read at once (not byte by byte: most of a short key's hash). */
    private static final java.lang.invoke.VarHandle LITTLE_ENDIAN_LONG =
        java.lang.invoke.MethodHandles.byteArrayViewVarHandle(long[].class, java.nio.ByteOrder.LITTLE_ENDIAN);

    private static long littleEndianLong(byte[] b, int from, int count) {
        long v = 0;
        for (int i = count - 1; i >= 0; i--) {
            v = (v << 8) | (b[from + i] & 0xFFL);
        }
        return v;
    }

    static long sipHash24(byte[] data, int length) {
        long v0 = K0 ^ 0x736f6d6570736575L;
        long v1 = K1 ^ 0x646f72616e646f6dL;
        long v2 = K0 ^ 0x6c7967656e657261L;
        long v3 = K1 ^ 0x7465646279746573L;
        int full = length - (length % 8);
        for (int i = 0; i < full; i += 8) {
            long m = (long) LITTLE_ENDIAN_LONG.get(data, i);
            v3 ^= m;
            for (int r = 0; r < 2; r++) {
                v0 += v1; v1 = Long.rotateLeft(v1, 13); v1 ^= v0; v0 = Long.rotateLeft(v0, 32);
                v2 += v3; v3 = Long.rotateLeft(v3, 16); v3 ^= v2;
                v0 += v3; v3 = Long.rotateLeft(v3, 21); v3 ^= v0;
                v2 += v1; v1 = Long.rotateLeft(v1, 17); v1 ^= v2; v2 = Long.rotateLeft(v2, 32);
            }
            v0 ^= m;
        }
        long last = ((long) length) << 56 | littleEndianLong(data, full, length - full);
        v3 ^= last;
        for (int r = 0; r < 2; r++) {
            v0 += v1; v1 = Long.rotateLeft(v1, 13); v1 ^= v0; v0 = Long.rotateLeft(v0, 32);
            v2 += v3; v3 = Long.rotateLeft(v3, 16); v3 ^= v2;
            v0 += v3; v3 = Long.rotateLeft(v3, 21); v3 ^= v0;
            v2 += v1; v1 = Long.rotateLeft(v1, 17); v1 ^= v2; v2 = Long.rotateLeft(v2, 32);
        }
        v0 ^= last;
        v2 ^= 0xff;
        for (int r = 0; r < 4; r++) {
            v0 += v1; v1 = Long.rotateLeft(v1, 13); v1 ^= v0; v0 = Long.rotateLeft(v0, 32);
            v2 += v3; v3 = Long.rotateLeft(v3, 16); v3 ^= v2;
            v0 += v3; v3 = Long.rotateLeft(v3, 21); v3 ^= v0;
            v2 += v1; v1 = Long.rotateLeft(v1, 17); v1 ^= v2; v2 = Long.rotateLeft(v2, 32);
        }
        return v0 ^ v1 ^ v2 ^ v3;
    }
}
