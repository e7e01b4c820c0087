package tablestore.spark.jvm.read;

import java.time.LocalDate;

import org.apache.parquet.filter2.predicate.FilterApi;
import org.apache.parquet.filter2.predicate.FilterPredicate;
import org.apache.parquet.filter2.predicate.Operators;
import org.apache.parquet.io.api.Binary;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;

/**
 * A scan's pushed filters as a Parquet predicate, for the raw-split reader to skip the row groups (and, through the
 * files' column indexes, the pages) whose statistics contradict it: the data files are sorted by key, so a key range
 * touches few of them. Only what is sure to mean the same in Parquet is translated (comparisons, IN, AND, OR of
 * them on top-level columns of integer, floating, boolean, string and date types); the rest is left out, which only
 * widens what is read. Spark still evaluates every filter on the rows (the source returns them all as post-scan
 * filters), so skipping is an optimisation and never decides an answer.
 */
public final class ParquetPredicates {
    private ParquetPredicates() {
    }

    /** The conjunction of the translatable {@code filters}, or null when none is. */
    public static FilterPredicate of(Filter[] filters, StructType schema) {
        FilterPredicate out = null;
        for (Filter f : filters) {
            FilterPredicate p = translate(f, schema);
            if (p != null) {
                out = out == null ? p : FilterApi.and(out, p);
            }
        }
        return out;
    }

    static FilterPredicate translate(Filter f, StructType schema) {
        if (f instanceof And) {
            FilterPredicate l = translate(((And) f).left(), schema);
            FilterPredicate r = translate(((And) f).right(), schema);
            return l == null ? r : r == null ? l : FilterApi.and(l, r);
        }
        if (f instanceof Or) {
            FilterPredicate l = translate(((Or) f).left(), schema);
            FilterPredicate r = translate(((Or) f).right(), schema);
            return l == null || r == null ? null : FilterApi.or(l, r);   // one side unknown: anything may match
        }
        if (f instanceof EqualTo) {
            return compare("eq", ((EqualTo) f).attribute(), ((EqualTo) f).value(), schema);
        }
        if (f instanceof LessThan) {
            return compare("lt", ((LessThan) f).attribute(), ((LessThan) f).value(), schema);
        }
        if (f instanceof LessThanOrEqual) {
            return compare("ltEq", ((LessThanOrEqual) f).attribute(), ((LessThanOrEqual) f).value(), schema);
        }
        if (f instanceof GreaterThan) {
            return compare("gt", ((GreaterThan) f).attribute(), ((GreaterThan) f).value(), schema);
        }
        if (f instanceof GreaterThanOrEqual) {
            return compare("gtEq", ((GreaterThanOrEqual) f).attribute(), ((GreaterThanOrEqual) f).value(), schema);
        }
        if (f instanceof In) {
            FilterPredicate out = null;
            for (Object v : ((In) f).values()) {
                FilterPredicate p = compare("eq", ((In) f).attribute(), v, schema);
                if (p == null) {
                    return null;
                }
                out = out == null ? p : FilterApi.or(out, p);
            }
            return out;
        }
        return null;
    }

    private static DataType typeOf(String column, StructType schema) {
        if (column.contains(".") || column.contains("`")) {
            return null;   // Parquet reads a dot as a nested path
        }
        for (org.apache.spark.sql.types.StructField field : schema.fields()) {
            if (field.name().equals(column)) {
                return field.dataType();
            }
        }
        return null;
    }

    private static FilterPredicate compare(String op, String column, Object value, StructType schema) {
        DataType type = typeOf(column, schema);
        if (type == null || value == null) {
            return null;
        }
        if (type instanceof BooleanType) {
            return op.equals("eq") && value instanceof Boolean
                ? FilterApi.eq(FilterApi.booleanColumn(column), (Boolean) value) : null;
        }
        if (type instanceof StringType) {
            return value instanceof String ? cmp(op, FilterApi.binaryColumn(column), Binary.fromString((String) value))
                : null;
        }
        if (type instanceof DateType) {
            Integer days = daysOf(value);
            return days == null ? null : cmp(op, FilterApi.intColumn(column), days);
        }
        if (!(value instanceof Number)) {
            return null;
        }
        Number n = (Number) value;
        if (type instanceof IntegerType || type instanceof ShortType || type instanceof ByteType) {
            return cmp(op, FilterApi.intColumn(column), n.intValue());
        }
        if (type instanceof LongType) {
            return cmp(op, FilterApi.longColumn(column), n.longValue());
        }
        if (type instanceof DoubleType) {
            return Double.isNaN(n.doubleValue()) ? null : cmp(op, FilterApi.doubleColumn(column), n.doubleValue());
        }
        if (type instanceof FloatType) {
            return Float.isNaN(n.floatValue()) ? null : cmp(op, FilterApi.floatColumn(column), n.floatValue());
        }
        return null;
    }

    private static <T extends Comparable<T>, C extends Operators.Column<T> & Operators.SupportsLtGt> FilterPredicate
            cmp(String op, C column, T value) {
        switch (op) {
            case "eq":
                return FilterApi.eq(column, value);
            case "lt":
                return FilterApi.lt(column, value);
            case "ltEq":
                return FilterApi.ltEq(column, value);
            case "gt":
                return FilterApi.gt(column, value);
            default:
                return FilterApi.gtEq(column, value);
        }
    }

    private static Integer daysOf(Object value) {
        if (value instanceof LocalDate) {
            return Math.toIntExact(((LocalDate) value).toEpochDay());
        }
        if (value instanceof java.sql.Date) {
            return Math.toIntExact(((java.sql.Date) value).toLocalDate().toEpochDay());
        }
        return null;
    }
}
