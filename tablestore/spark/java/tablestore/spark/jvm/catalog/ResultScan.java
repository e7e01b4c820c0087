package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A result of the Python helper ({@code tablestore.spark.sql_actions}) as a Spark {@code LocalScan}: the result is
 * {"schema": "&lt;DDL&gt;", "rows": [[...], ...]} with JSON values by column type (TIMESTAMP as epoch milliseconds,
 * ARRAY as a list, MAP as an object whose keys are converted to the key type). Procedures return one (Spark accepts
 * exactly one LocalScan as a procedure's output); system tables scan as one.
 */
final class ResultScan implements LocalScan {
    private final StructType schema;
    private final InternalRow[] rows;

    ResultScan(StructType schema, InternalRow[] rows) {
        this.schema = schema;
        this.rows = rows;
    }

    static StructType schemaOf(JsonNode result) {
        return StructType.fromDDL(result.get("schema").asText());
    }

    static ResultScan of(JsonNode result) {
        StructType schema = schemaOf(result);
        List<InternalRow> rows = new ArrayList<>();
        for (JsonNode row : result.get("rows")) {
            Object[] values = new Object[schema.size()];
            for (int i = 0; i < values.length; i++) {
                values[i] = value(row.get(i), schema.fields()[i].dataType());
            }
            rows.add(new GenericInternalRow(values));
        }
        return new ResultScan(schema, rows.toArray(new InternalRow[0]));
    }

    static Object value(JsonNode v, DataType type) {
        if (v == null || v.isNull()) {
            return null;
        }
        if (type instanceof StringType) {
            return UTF8String.fromString(v.isTextual() ? v.asText() : v.toString());
        }
        if (type instanceof LongType) {
            return v.asLong();
        }
        if (type instanceof IntegerType) {
            return v.asInt();
        }
        if (type instanceof BooleanType) {
            return v.asBoolean();
        }
        if (type instanceof DoubleType) {
            return v.asDouble();
        }
        if (type instanceof TimestampType) {
            return v.asLong() * 1000L;   // epoch milliseconds -> Spark's microseconds
        }
        if (type instanceof ArrayType) {
            DataType element = ((ArrayType) type).elementType();
            Object[] out = new Object[v.size()];
            for (int i = 0; i < out.length; i++) {
                out[i] = value(v.get(i), element);
            }
            return new GenericArrayData(out);
        }
        if (type instanceof MapType) {
            MapType map = (MapType) type;
            List<Object> keys = new ArrayList<>();
            List<Object> values = new ArrayList<>();
            Iterator<Map.Entry<String, JsonNode>> fields = v.fields();
            while (fields.hasNext()) {
                Map.Entry<String, JsonNode> e = fields.next();
                keys.add(value(PythonService.mapper().getNodeFactory().textNode(e.getKey()), map.keyType()));
                values.add(value(e.getValue(), map.valueType()));
            }
            return new ArrayBasedMapData(new GenericArrayData(keys.toArray()), new GenericArrayData(values.toArray()));
        }
        throw new IllegalArgumentException("a result column of type " + type.simpleString() + " is not supported");
    }

    @Override
    public StructType readSchema() {
        return schema;
    }

    @Override
    public InternalRow[] rows() {
        return rows;
    }

    @Override
    public String description() {
        return "ResultScan(" + rows.length + " rows)";
    }
}
