package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.core.JsonProcessingException;

import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.GeneralScalarExpression;
import org.apache.spark.sql.connector.expressions.Literal;
import org.apache.spark.sql.connector.expressions.NamedReference;

/**
 * Spark's V2 predicates as JSON for Python (tablestore/spark/predicates.py): a list of predicates (ANDed), each
 * <pre>
 *   {"op": "=", "args": [...]}          a predicate or scalar function, Spark's name() ("=", "AND", "IS_NULL", ...)
 *   {"ref": ["dt"]}                     a column
 *   {"lit": "2024-01-01", "type": "string"}   a literal: its value as text (null: JSON null), Spark's type name
 *   {"unsupported": "..."}              anything else (Python refuses it, naming it)
 * </pre>
 */
public final class PredicateJson {
    private PredicateJson() {
    }

    public static String toJson(Expression[] predicates) {
        List<Object> out = new ArrayList<>();
        for (Expression p : predicates) {
            out.add(describe(p));
        }
        try {
            return PythonService.mapper().writeValueAsString(out);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot encode predicates " + Arrays.toString(predicates), e);
        }
    }

    static Object describe(Expression e) {
        Map<String, Object> out = new LinkedHashMap<>();
        if (e == null) {
            out.put("unsupported", "a filter with no V2 form");
        } else if (e instanceof NamedReference) {
            out.put("ref", Arrays.asList(((NamedReference) e).fieldNames()));
        } else if (e instanceof Literal) {
            Object value = ((Literal<?>) e).value();
            out.put("lit", value == null ? null : value.toString());
            out.put("type", ((Literal<?>) e).dataType().simpleString());
        } else if (e instanceof GeneralScalarExpression) {
            GeneralScalarExpression g = (GeneralScalarExpression) e;
            out.put("op", g.name());
            List<Object> args = new ArrayList<>();
            for (Expression child : g.children()) {
                args.add(describe(child));
            }
            out.put("args", args);
        } else {
            out.put("unsupported", e.toString());
        }
        return out;
    }
}
