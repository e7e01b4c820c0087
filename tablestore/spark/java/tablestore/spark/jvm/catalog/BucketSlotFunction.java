package tablestore.spark.jvm.catalog;

import java.io.Serializable;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;
import org.apache.spark.unsafe.types.UTF8String;

import tablestore.spark.jvm.mirror.BucketFunction;

/**
 * The write clustering of a table without partition columns: the table's bucket ({@link BucketFunction}) as a
 * value that Spark's hash partitioning into {@code tasks} partitions sends to task {@code bucket % tasks}.
 *
 * <p>Spark clusters a write with {@code pmod(murmur3(value, seed 42), tasks)}; clustered by the bare bucket number,
 * two buckets often share a task while another task idles (buckets 0 and 1 of 2 both hash to task 1 of 2), and
 * the write runs at the speed of one core. This function returns, for bucket {@code b}, the smallest
 * {@code b + k * buckets} that hashes to task {@code b % tasks}: distinct buckets stay distinct values (still one
 * writer per bucket) and spread evenly. Its name carries both counts: {@code tablestore_bucket_slot:<tasks>:<the
 * bucket function's name>}; the write asks Spark for exactly {@code tasks} partitions.
 */
public final class BucketSlotFunction implements UnboundFunction {
    private static final long serialVersionUID = 1L;
    static final String PREFIX = "tablestore_bucket_slot";
    /**
     * The prefix of a slot function over a table's primary key, which every writer refuses a null in (the JVM
     * writer and the Python writer alike): it binds a nullable key column as a non-null one, so that Spark calls
     * it compiled ({@link BucketFunction.OneColumn}); a null key's row reaches some task, which refuses it.
     */
    static final String KEY_PREFIX = "tablestore_bucket_slot_pk";
    private static final int SPARK_HASH_SEED = 42;   // HashPartitioning's Murmur3Hash seed

    private final int tasks;
    private final BucketFunction bucket;
    private final boolean primaryKey;

    BucketSlotFunction(int tasks, BucketFunction bucket, boolean primaryKey) {
        this.tasks = tasks;
        this.bucket = bucket;
        this.primaryKey = primaryKey;
    }

    static String name(int tasks, String bucketFunctionName) {
        return name(tasks, bucketFunctionName, false);
    }

    /** The name of the slot function; {@code primaryKey}: the key is the table's primary key ({@link #KEY_PREFIX}). */
    static String name(int tasks, String bucketFunctionName, boolean primaryKey) {
        return (primaryKey ? KEY_PREFIX : PREFIX) + ":" + tasks + ":" + bucketFunctionName;
    }

    /** The function {@code name} names, or null when it is not a slot function's name. */
    static BucketSlotFunction fromName(String name) {
        boolean primaryKey = name.startsWith(KEY_PREFIX + ":");
        if (!primaryKey && !name.startsWith(PREFIX + ":")) {
            return null;
        }
        String[] parts = name.split(":", 3);
        return new BucketSlotFunction(Integer.parseInt(parts[1]), BucketFunction.fromName(parts[2]), primaryKey);
    }

    /** The value of each bucket: {@code slots[b]} hashes to task {@code b % tasks}. */
    static int[] slots(int buckets, int tasks) {
        int[] out = new int[buckets];
        for (int b = 0; b < buckets; b++) {
            int v = b;
            while (Math.floorMod(Murmur3_x86_32.hashInt(v, SPARK_HASH_SEED), tasks) != b % tasks) {
                v += buckets;
            }
            out[b] = v;
        }
        return out;
    }

    @Override
    public BoundFunction bind(StructType inputType) {
        StructType key = inputType;
        if (primaryKey) {
            StructField[] fields = inputType.fields().clone();
            for (int i = 0; i < fields.length; i++) {
                fields[i] = new StructField(fields[i].name(), fields[i].dataType(), false, fields[i].metadata());
            }
            key = new StructType(fields);
        }
        BucketFunction.Bound bound = (BucketFunction.Bound) bucket.bind(key);
        int[] slots = slots(bucketCount(), tasks);
        return bound instanceof BucketFunction.OneColumn one ? new OneColumn(name(), one, slots)
            : new Bound(name(), bound, slots);
    }

    private int bucketCount() {
        return Integer.parseInt(bucket.name().split(":", 3)[1]);
    }

    @Override
    public String description() {
        return name() + ": the tablestore bucket of a key, spread over " + tasks + " write tasks";
    }

    @Override
    public String name() {
        return name(tasks, bucket.name(), primaryKey);
    }

    /** The bound function: the slot value (int, never null) of a row's bucket. */
    public static class Bound implements ScalarFunction<Integer>, Serializable {
        private static final long serialVersionUID = 1L;
        private final String name;
        private final BucketFunction.Bound bucket;
        private final int[] slots;

        Bound(String name, BucketFunction.Bound bucket, int[] slots) {
            this.name = name;
            this.bucket = bucket;
            this.slots = slots;
        }

        @Override
        public Integer produceResult(InternalRow input) {
            return slot(bucket.bucket(input));
        }

        final int slot(int bucket) {
            return slots[bucket];
        }

        @Override
        public DataType[] inputTypes() {
            return bucket.inputTypes();
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
        public String canonicalName() {
            return name;
        }

        @Override
        public String name() {
            return name;
        }
    }

    /** The slot of a one-column key that is never null, called compiled: {@link BucketFunction.OneColumn}. */
    public static final class OneColumn extends Bound {
        private static final long serialVersionUID = 1L;
        private final BucketFunction.OneColumn one;

        OneColumn(String name, BucketFunction.OneColumn bucket, int[] slots) {
            super(name, bucket, slots);
            this.one = bucket;
        }

        @Override
        public Integer produceResult(InternalRow input) {
            return slot(one.bucket(input));   // declared here too: Spark looks for it on the function's own class
        }

        public int invoke(long key) {
            return slot(one.invoke(key));
        }

        public int invoke(int key) {
            return slot(one.invoke(key));
        }

        public int invoke(UTF8String key) {
            return slot(one.invoke(key));
        }
    }
}
