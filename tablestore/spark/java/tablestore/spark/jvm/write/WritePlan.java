package tablestore.spark.jvm.write;

import java.io.File;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * What the JVM writer of a batch write needs from the table, written by Python's planning of the write
 * (tablestore/spark/jvm_write.py, {@code write_plan}) to the file named by the write's option
 * {@value JvmBatchWrite#PLAN_OPTION}: {@code usable} (false with a {@code reason} when the table is one the JVM
 * writer does not write: Python writes it), the bucket directories (paths, or {@code s3a://} URLs with the S3A
 * settings in {@code hadoop}), each bucket's highest committed sequence number
 * in the job's base snapshot, the per-task stride, compression, write-buffer-size, target-file-size, the table's
 * columns (name, type) and its one primary-key column.
 */
public final class WritePlan implements Serializable {
    private static final long serialVersionUID = 1L;

    final String table;
    final String[] bucketDirs;
    final long[] baseSequences;
    final long stride;
    final String compression;
    final long writeBufferSize;
    final long targetFileSize;
    final String[] names;
    final String[] types;
    final int key;
    /** The Hadoop settings of the bucket directories' file system when they are URLs ({@code s3a://}). */
    final java.util.HashMap<String, String> hadoop;
    /** Per table column, the ordinal of the input row's column (set by {@link #bind}). */
    int[] ordinals;

    private WritePlan(JsonNode plan) {
        table = plan.path("table").asText();
        List<String> dirs = new ArrayList<>();
        plan.path("bucket_dirs").forEach(n -> dirs.add(n.asText()));
        bucketDirs = dirs.toArray(new String[0]);
        JsonNode base = plan.path("base_sequences");
        baseSequences = new long[base.size()];
        for (int i = 0; i < baseSequences.length; i++) {
            baseSequences[i] = base.get(i).asLong();
        }
        stride = plan.path("stride").asLong();
        compression = plan.path("compression").asText();
        writeBufferSize = plan.path("write_buffer_size").asLong();
        targetFileSize = plan.path("target_file_size").asLong();
        JsonNode columns = plan.path("columns");
        names = new String[columns.size()];
        types = new String[columns.size()];
        int k = -1;
        for (int i = 0; i < names.length; i++) {
            JsonNode c = columns.get(i);
            names[i] = c.path("name").asText();
            types[i] = c.path("type").asText();
            if (names[i].equals(plan.path("key").asText())) {
                k = i;
            }
        }
        key = k;
        hadoop = tablestore.spark.jvm.HadoopFiles.settings(plan.get("hadoop"));
    }

    /**
     * The plan in {@code file} (removed once read), or null when Python did not write one or wrote it unusable
     * ({@code reasons} gets why).
     */
    static WritePlan read(String file, StringBuilder reasons) {
        File f = new File(file);
        if (!f.exists()) {
            reasons.append("no JVM write plan (the table's Python writer wrote none)");
            return null;
        }
        JsonNode plan;
        try {
            plan = new ObjectMapper().readTree(f);
        } catch (IOException e) {
            throw new UncheckedIOException("reading the JVM write plan " + f, e);
        } finally {
            f.delete();
        }
        if (!plan.path("usable").asBoolean(false)) {
            reasons.append(plan.path("reason").asText("unusable"));
            return null;
        }
        return new WritePlan(plan);
    }

    /** The Spark type of a plan type name (tablestore/spark/jvm_write.py, JVM_TYPES). */
    static DataType sparkType(String type) {
        switch (type) {
            case "boolean": return DataTypes.BooleanType;
            case "byte": return DataTypes.ByteType;
            case "short": return DataTypes.ShortType;
            case "int": return DataTypes.IntegerType;
            case "long": return DataTypes.LongType;
            case "float": return DataTypes.FloatType;
            case "double": return DataTypes.DoubleType;
            case "date": return DataTypes.DateType;
            case "string": return DataTypes.StringType;
            case "binary": return DataTypes.BinaryType;
            default: throw new IllegalArgumentException("type " + type);
        }
    }

    /**
     * Binds the plan to the rows of the write ({@code input}): each table column to the input column of its name
     * and type. Returns null when they fit, else why not (extra columns such as {@code _row_kind}, a missing
     * column, another type: Python's writer then checks, casts or refuses the rows).
     */
    String bind(StructType input, boolean caseSensitive) {
        if (input.fields().length != names.length) {
            return "the rows have columns " + input.simpleString() + ", the table " + names.length;
        }
        int[] out = new int[names.length];
        for (int i = 0; i < names.length; i++) {
            out[i] = -1;
            StructField[] fields = input.fields();
            for (int j = 0; j < fields.length; j++) {
                String a = fields[j].name();
                if (caseSensitive ? a.equals(names[i]) : a.toLowerCase(Locale.ROOT).equals(
                        names[i].toLowerCase(Locale.ROOT))) {
                    out[i] = j;
                }
            }
            if (out[i] < 0) {
                return "the rows lack column " + names[i];
            }
            if (!input.fields()[out[i]].dataType().sameType(sparkType(types[i]))) {
                return "column " + names[i] + " is " + input.fields()[out[i]].dataType().simpleString()
                    + ", the table's is " + types[i];
            }
        }
        ordinals = out;
        return null;
    }
}
