package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.Transform;

/**
 * The partitions {@code OPTIMIZE t WHERE <predicate>} (Delta's statement; {@code compact(where => ...)}) selects, as
 * the {@code partitions} text of {@code compact}: the predicate may name partition columns only (Delta's rule), and
 * is evaluated by Spark over the distinct partition values of the table.
 */
final class OptimizeWhere {
    private OptimizeWhere() {
    }

    /** "k=v,k=v;k=v,..." of the partitions {@code where} selects in {@code table} ("db.t"); "" when none. */
    static String partitions(ManagedCatalog catalog, String table, String where) {
        String[] parts = table.split("\\.", 2);
        List<String> columns = new ArrayList<>();
        try {
            for (Transform t : catalog.loadTable(Identifier.of(new String[] {parts[0]}, parts[1])).partitioning()) {
                for (NamedReference ref : t.references()) {
                    columns.add(ref.fieldNames()[0]);
                }
            }
        } catch (org.apache.spark.sql.catalyst.analysis.NoSuchTableException e) {
            throw Errors.unchecked(new PythonServiceException("TableNotFoundError", "table '" + table
                + "' does not exist"));
        }
        String name = SqlRewrite.quoteName(catalog.name()) + "." + SqlRewrite.quoteName(parts[0]) + "."
            + SqlRewrite.quoteName(parts[1]);
        Dataset<Row> filtered = SparkSession.active().table(name).where(where);
        Set<String> named = new LinkedHashSet<>();
        LogicalPlan plan = filtered.queryExecution().analyzed();
        if (plan instanceof Filter) {
            scala.collection.Iterator<Attribute> refs = ((Filter) plan).condition().references().iterator();
            while (refs.hasNext()) {
                named.add(refs.next().name());
            }
        }
        List<String> others = new ArrayList<>();
        for (String column : named) {
            if (columns.stream().noneMatch(c -> c.equalsIgnoreCase(column))) {
                others.add(column);
            }
        }
        if (!others.isEmpty()) {
            throw Errors.unchecked(new PythonServiceException("InvalidArgument", "table '" + table + "': OPTIMIZE ... "
                + "WHERE may name partition columns only (" + (columns.isEmpty() ? "the table has none"
                : String.join(", ", columns)) + "), not " + String.join(", ", others)));
        }
        if (columns.isEmpty()) {
            return null;   // an unpartitioned table: a predicate on no column selects all or nothing
        }
        List<String> specs = new ArrayList<>();
        for (Row row : filtered.selectExpr(columns.stream().map(SqlRewrite::quoteName).toArray(String[]::new))
                .distinct().collectAsList()) {
            List<String> pairs = new ArrayList<>();
            for (int i = 0; i < columns.size(); i++) {
                if (row.isNullAt(i)) {
                    throw Errors.unchecked(new PythonServiceException("InvalidArgument", "table '" + table
                        + "': OPTIMIZE ... WHERE selects the null partition of " + columns.get(i) + ", which "
                        + "compaction by partition cannot name; narrow the predicate or OPTIMIZE the whole table"));
                }
                pairs.add(columns.get(i) + "=" + row.get(i));
            }
            specs.add(String.join(",", pairs));
        }
        return String.join(";", specs);
    }
}
