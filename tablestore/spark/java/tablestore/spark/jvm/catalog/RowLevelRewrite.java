package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.AppendData;
import org.apache.spark.sql.catalyst.plans.logical.Assignment;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.UpdateTable;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.types.StructField;
import tablestore.spark.jvm.mirror.Contract;

/**
 * MERGE INTO and UPDATE on a managed table, rewritten once Spark has resolved them (as Paimon's SQL extension does,
 * instead of Spark's row-level interfaces, which would hand the writer rewritten files, not a changelog):
 * <ol>
 *   <li>The table's latest snapshot S when the statement was analyzed is pinned: the rewritten plan reads the
 *       target at S ({@link ManagedTable#readingSnapshot}).</li>
 *   <li>The plan computes the statement's changes as rows of {@link RowChangesTable}: {@code +U} (the new row) per
 *       updated row, {@code -D} (the old row, read by the plan's own target read) per deleted one, {@code +I} per
 *       inserted one ({@link MergePlan} for MERGE: one join of target and source). No {@code -U} row: on the
 *       tables these statements accept it changes neither the table (the {@code +U} replaces the key's row) nor
 *       its log, which in {@code upsert} mode stores no {@code -U} and in {@code all} mode is the snapshot's
 *       changelog (tablestore/log_publish.py, diffs_snapshots), with the old rows; readers of the changelog get
 *       {@code -U} then {@code +U} either way.</li>
 *   <li>The rows go through the table's write (one writer per bucket; rows of a key keep their order) with the
 *       write option {@value #PLANNED_SNAPSHOT_OPTION} = S: the Python writer writes on top of S and its one commit
 *       fails with ConcurrentUpdateError, nothing committed, if a data commit since S touched a bucket it writes
 *       (tablestore/spark/write.py, filestore/commit.py step 4).</li>
 * </ol>
 * Primary-key tables of merge-engine deduplicate without a sequence.field only; a primary-key column is never
 * updated (that is a delete and an insert).
 */
final class RowLevelRewrite extends Rule<LogicalPlan> {
    /** tablestore/spark/write.py's PLANNED_SNAPSHOT_OPTION. */
    static final String PLANNED_SNAPSHOT_OPTION = Contract.PLANNED_SNAPSHOT_OPTION;

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (plan instanceof MergeIntoTable m) {
            Target target = Target.of(m.targetTable(), "MERGE INTO");
            if (target == null || !m.resolved()) {
                return plan;
            }
            return MergePlan.rewrite(m, target);
        }
        if (plan instanceof UpdateTable u) {
            Target target = Target.of(u.table(), "UPDATE");
            if (target == null || !u.resolved()) {
                return plan;
            }
            return update(u, target);
        }
        return plan;
    }

    /** The managed table a statement changes, as the analyzed plan reads it. */
    record Target(String statement, ManagedTable table, DataSourceV2Relation relation, LogicalPlan plan) {
        /** Null when {@code plan} is not a managed table's relation (another catalog's statement). */
        static Target of(LogicalPlan plan, String statement) {
            LogicalPlan node = plan;
            while (node instanceof SubqueryAlias alias) {
                node = alias.child();
            }
            if (!(node instanceof DataSourceV2Relation r) || !(r.table() instanceof ManagedTable t)
                    || t.catalog() == null) {   // a data source's table is never a statement's target
                return null;
            }
            Target target = new Target(statement, t, r, plan);
            if (t.primaryKey().isEmpty()) {
                throw target.error("it has no primary key: " + statement + " applies its changes by key. On a "
                    + "table without one, DELETE FROM and INSERT INTO rewrite rows");
            }
            String engine = t.properties().getOrDefault("merge-engine", "deduplicate");
            if (!engine.equals("deduplicate") || t.properties().containsKey("sequence.field")) {
                throw target.error("its merge-engine is " + engine
                    + (t.properties().containsKey("sequence.field") ? " with a sequence.field" : "") + ": "
                    + statement + " writes each updated row whole (+U) and each deleted one as a retraction (-D), "
                    + "which only merge-engine deduplicate without a sequence.field applies as a replacement (the "
                    + "others merge rows or refuse retractions, and a sequence.field could order a new row before "
                    + "an older one); write the new rows with INSERT INTO instead");
            }
            return target;
        }

        String name() {
            return table.name();
        }

        RuntimeException error(String why) {
            return Errors.unchecked(new PythonServiceException("RowLevelError",
                statement + " " + name() + ": " + why));
        }

        /** The target read at the pinned snapshot (same output attributes: the statement's expressions hold). */
        LogicalPlan pinned() {
            Long snapshot = table.loadedSnapshot();
            return snapshot == null ? plan : withTable(plan, table.readingSnapshot(snapshot));
        }

        /** The snapshot the write is planned on ("0": the table had none). */
        String plannedOn() {
            Long snapshot = table.loadedSnapshot();
            return snapshot == null ? "0" : snapshot.toString();
        }

        /** The target's attribute of each table column, in table order. */
        List<Attribute> columns() {
            List<Attribute> out = new ArrayList<>();
            for (StructField f : table.schema().fields()) {
                out.add(attribute(f.name()));
            }
            return out;
        }

        Attribute attribute(String column) {
            for (Attribute a : Catalyst.list(relation.output())) {
                if (a.name().equalsIgnoreCase(column)) {
                    return a;
                }
            }
            throw new IllegalStateException("no column " + column + " in " + relation);
        }

        boolean isKey(String column) {
            return table.primaryKey().stream().anyMatch(k -> k.equalsIgnoreCase(column));
        }

        /**
         * The assigned value of each column {@code assignments} set (by table column name, lower case); a
         * primary-key column may only be set to {@code allowed} of it (its own value, or the source value the ON
         * condition equates it with), else the statement is refused.
         */
        Map<String, Expression> assigned(List<Assignment> assignments, Map<String, Expression> allowed,
                                         String clause) {
            Map<String, Expression> out = new LinkedHashMap<>();
            for (Assignment a : assignments) {
                if (!(a.key() instanceof Attribute key)) {
                    throw error(clause + " sets " + a.key().sql() + ": only whole columns can be set");
                }
                String column = key.name().toLowerCase(Locale.ROOT);
                Expression value = a.value();
                if (isKey(column) && !sameValue(value, attribute(column))
                        && !(allowed.containsKey(column) && sameValue(value, allowed.get(column)))) {
                    throw error(clause + " sets the primary-key column " + key.name() + " (" + value.sql() + "): a "
                        + "primary key is not updated in place, a row under a new key is a delete and an insert. "
                        + "Delete the old row (DELETE FROM, or WHEN MATCHED THEN DELETE) and insert the new one "
                        + "(INSERT INTO, or WHEN NOT MATCHED THEN INSERT)");
                }
                out.put(column, value);
            }
            return out;
        }

        /** {@code changes} (the table's columns and {@code _row_kind}) appended through {@link RowChangesTable}. */
        LogicalPlan write(LogicalPlan changes) {
            DataSourceV2Relation out = Catalyst.call(DataSourceV2Relation.class, DataSourceV2Relation.class,
                "create", new RowChangesTable(table), relation.catalog(), relation.identifier());
            scala.collection.immutable.Map<String, String> options = scala.collection.immutable.Map$.MODULE$
                .<String, String>empty().updated(PLANNED_SNAPSHOT_OPTION, plannedOn());
            return Catalyst.call(AppendData.class, AppendData.class, "byName", out, changes, options);
        }
    }

    /** {@code plan} with its managed table's relation reading {@code table} instead (same output attributes). */
    static LogicalPlan withTable(LogicalPlan plan, ManagedTable table) {
        if (plan instanceof DataSourceV2Relation r) {
            List<Object> args = new ArrayList<>();
            scala.jdk.javaapi.CollectionConverters.asJava(r.productIterator())
                .forEachRemaining(a -> args.add(a instanceof ManagedTable ? table : a));
            return (LogicalPlan) r.makeCopy(args.toArray());
        }
        List<LogicalPlan> children = new ArrayList<>();
        for (LogicalPlan child : Catalyst.list(plan.children())) {
            children.add(withTable(child, table));
        }
        return plan.withNewChildren(Catalyst.seq(children));
    }

    private static boolean sameValue(Expression a, Expression b) {
        return strip(a).semanticEquals(strip(b));
    }

    /** {@code e} without the casts and null checks Spark's analysis wraps around a value assigned to a column. */
    static Expression strip(Expression e) {
        while (true) {
            if (e instanceof Cast c) {
                e = c.child();
            } else if (e instanceof org.apache.spark.sql.catalyst.expressions.objects.AssertNotNull a) {
                e = a.child();
            } else {
                return e;
            }
        }
    }

    /** The new row's +U for each row {@code WHERE} selects (see the class comment for why no -U). */
    private static LogicalPlan update(UpdateTable u, Target target) {
        Map<String, Expression> set = target.assigned(Catalyst.list(u.assignments()), Map.of(), "SET");
        LogicalPlan rows = target.pinned();
        if (u.condition().isDefined()) {
            rows = new Filter(u.condition().get(), rows);
        }
        List<NamedExpression> after = new ArrayList<>();
        for (Attribute column : target.columns()) {
            Expression value = set.get(column.name().toLowerCase(Locale.ROOT));
            after.add(Catalyst.alias(value == null ? column : Catalyst.cast(value, column.dataType()), column.name()));
        }
        after.add(Catalyst.alias(kind("+U"), ManagedScan.ROW_KIND));
        return target.write(new Project(Catalyst.seq(after), rows));
    }

    static Literal kind(String kind) {
        return Catalyst.string(kind);
    }
}
