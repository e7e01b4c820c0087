package tablestore.spark.jvm.mirror;   // the package of the classes it checks (their key buffer is package-private)

import java.io.File;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The Spark jar's key rules (KeyEncoder: filestore/keycodec.py's bytes; BucketFunction: filestore/bucket.py's hash
 * and bucket) against the golden vectors Python's tests read too (tests/data/golden/keys.json). Each case's values,
 * in their stored form, become the Spark values a key column of that Arrow type carries (tablestore/spark/types.py);
 * the key bytes, the hash and the bucket for each bucket count must be the file's. Prints one line per mismatch and
 * exits 1 when there is one, else prints how many cases it checked.
 */
public final class GoldenKeys {
    private GoldenKeys() {
    }

    public static void main(String[] args) throws Exception {
        JsonNode doc = new ObjectMapper().readTree(new File(args[0]));
        List<String> failures = new ArrayList<>();
        int checked = 0;
        for (JsonNode c : doc.get("cases")) {
            List<String> types = new ArrayList<>();
            c.get("types").forEach(t -> types.add(t.asText()));
            String label = types + "=" + c.get("values");
            try {
                check(c, types, label, failures);
            } catch (RuntimeException e) {
                failures.add(label + ": " + e);
            }
            checked++;
        }
        failures.forEach(System.out::println);
        System.out.println(checked + " cases, " + failures.size() + " failures");
        System.exit(failures.isEmpty() ? 0 : 1);
    }

    private static void check(JsonNode c, List<String> types, String label, List<String> failures) {
        int n = types.size();
        Object[] values = new Object[n];
        DataType[] sparkTypes = new DataType[n];
        KeyEncoder.Bytes key = new KeyEncoder.Bytes();
        for (int i = 0; i < n; i++) {
            KeyEncoder encoder = KeyEncoder.forArrowType(types.get(i));
            sparkTypes[i] = encoder.sparkType();
            values[i] = sparkValue(types.get(i), sparkTypes[i], c.get("values").get(i));
        }
        InternalRow row = new GenericInternalRow(values);
        for (int i = 0; i < n; i++) {
            KeyEncoder.forArrowType(types.get(i)).encode(row, i, sparkTypes[i], key);
        }
        String hex = HexFormat.of().formatHex(key.data, 0, key.size);
        if (!hex.equals(c.get("key").asText())) {
            failures.add(label + ": key " + hex + ", expected " + c.get("key").asText());
        }
        String hash = Long.toUnsignedString(BucketFunction.hash(key.data, key.size));
        if (!hash.equals(c.get("hash").asText())) {
            failures.add(label + ": hash " + hash + ", expected " + c.get("hash").asText());
        }
        boolean anyNull = false;
        for (Object v : values) {
            anyNull |= v == null;
        }
        for (Map.Entry<String, JsonNode> e : iterable(c.get("buckets"))) {
            int buckets = Integer.parseInt(e.getKey());
            for (boolean nullable : anyNull ? new boolean[] {true} : new boolean[] {true, false}) {
                StructField[] fields = new StructField[n];
                for (int i = 0; i < n; i++) {
                    fields[i] = DataTypes.createStructField("k" + i, sparkTypes[i], nullable);
                }
                @SuppressWarnings("unchecked")
                ScalarFunction<Integer> bound = (ScalarFunction<Integer>) new BucketFunction(types, buckets)
                    .bind(new StructType(fields));
                int bucket = bound.produceResult(row);
                if (bucket != e.getValue().asInt()) {
                    failures.add(label + ": bucket " + bucket + " of " + buckets + " (nullable " + nullable
                        + "), expected " + e.getValue().asInt());
                }
            }
        }
    }

    private static Iterable<Map.Entry<String, JsonNode>> iterable(JsonNode object) {
        return object::fields;
    }

    /** The Spark value a column of Arrow type {@code arrow} (Spark type {@code spark}) carries for {@code v}. */
    private static Object sparkValue(String arrow, DataType spark, JsonNode v) {
        if (v.isNull()) {
            return null;
        }
        if (spark instanceof BooleanType) {
            return v.asBoolean();
        }
        if (spark instanceof ByteType) {
            return (byte) v.asInt();
        }
        if (spark instanceof ShortType) {
            return (short) v.asInt();
        }
        if (spark instanceof IntegerType) {
            return arrow.startsWith("date32") ? v.asInt() : (int) v.asLong();
        }
        if (spark instanceof LongType) {
            return v.asLong();
        }
        if (spark instanceof FloatType) {
            return Float.parseFloat(v.asText());
        }
        if (spark instanceof DoubleType) {
            return Double.parseDouble(v.asText());
        }
        if (spark instanceof DecimalType d) {
            BigDecimal value = v.isTextual() ? new BigDecimal(v.asText()) : new BigDecimal(v.bigIntegerValue());
            return Decimal.apply(value, d.precision(), d.scale());
        }
        if (spark instanceof DateType) {
            return arrow.startsWith("date64") ? (int) Math.floorDiv(v.asLong(), 86_400_000L) : v.asInt();
        }
        if (spark instanceof StringType) {
            return UTF8String.fromString(v.asText());
        }
        if (spark instanceof BinaryType) {
            return HexFormat.of().parseHex(v.asText());
        }
        // timestamps: Spark carries microseconds
        long stored = v.asLong();
        String unit = arrow.substring("timestamp[".length()).split("[,\\]]")[0];
        switch (unit) {
            case "s": return stored * 1_000_000L;
            case "ms": return stored * 1_000L;
            case "us": return stored;
            default: return Math.floorDiv(stored, 1_000L);
        }
    }
}
