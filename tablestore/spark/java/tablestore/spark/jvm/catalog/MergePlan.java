package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.expressions.CaseWhen;
import org.apache.spark.sql.catalyst.expressions.Coalesce;
import org.apache.spark.sql.catalyst.expressions.Concat;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GreaterThan;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Not;
import org.apache.spark.sql.catalyst.expressions.RaiseError;
import org.apache.spark.sql.catalyst.expressions.RowFrame$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.SpecifiedWindowFrame;
import org.apache.spark.sql.catalyst.expressions.UnboundedFollowing$;
import org.apache.spark.sql.catalyst.expressions.UnboundedPreceding$;
import org.apache.spark.sql.catalyst.expressions.WindowExpression;
import org.apache.spark.sql.catalyst.expressions.WindowSpecDefinition;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.Complete$;
import org.apache.spark.sql.catalyst.expressions.aggregate.Count;
import org.apache.spark.sql.catalyst.plans.FullOuter$;
import org.apache.spark.sql.catalyst.plans.Inner$;
import org.apache.spark.sql.catalyst.plans.JoinType;
import org.apache.spark.sql.catalyst.plans.LeftOuter$;
import org.apache.spark.sql.catalyst.plans.RightOuter$;
import org.apache.spark.sql.catalyst.plans.logical.DeleteAction;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.HintInfo;
import org.apache.spark.sql.catalyst.plans.logical.InsertAction;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.JoinHint;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeAction;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.SHUFFLE_HASH$;
import org.apache.spark.sql.catalyst.plans.logical.UpdateAction;
import org.apache.spark.sql.catalyst.plans.logical.Window;
import org.apache.spark.sql.types.DataTypes;

import scala.Option;
import scala.Tuple2;

/**
 * MERGE INTO a managed table as one plan ({@link RowLevelRewrite} has the protocol):
 * <pre>
 *   target at the pinned snapshot (+ a marker)  JOIN  source (+ a marker) [+ its rows per key value]  ON the key
 *     [a matched row whose key value has more than one source row: an error naming the key]
 *     Project: per joined row the change of the first WHEN clause that holds, as a row of (columns, _row_kind):
 *             MATCHED / NOT MATCHED BY SOURCE ... UPDATE: +U (new row); ... DELETE: -D (old row);
 *             NOT MATCHED ... INSERT: +I; no clause: no row (no -U: {@link RowLevelRewrite} says why)
 * </pre>
 * The join is inner with WHEN MATCHED clauses only, the target's outer side with WHEN NOT MATCHED (an insert),
 * the source's with WHEN NOT MATCHED BY SOURCE, full with both; a shuffled hash join built on the source's side,
 * so the target's rows are streamed through it, never sorted. The ON condition must be exactly one equality per
 * primary-key column with a value of the source: the changes are applied by key.
 */
final class MergePlan {
    private MergePlan() {
    }

    static LogicalPlan rewrite(MergeIntoTable m, RowLevelRewrite.Target target) {
        Map<String, Expression> bound = keyBinding(m, target);
        Alias targetMark = Catalyst.alias(Literal.TrueLiteral(), "__merge_target_row");
        Alias sourceMark = Catalyst.alias(Literal.TrueLiteral(), "__merge_source_row");
        LogicalPlan left = new Project(withMark(m.targetTable().output(), targetMark), target.pinned());
        LogicalPlan right = new Project(withMark(m.sourceTable().output(), sourceMark), m.sourceTable());
        boolean matched = !m.matchedActions().isEmpty();
        boolean notMatched = !m.notMatchedActions().isEmpty();
        boolean bySource = !m.notMatchedBySourceActions().isEmpty();
        Alias sourceRows = null;
        if (matched) {   // source rows per key value, counted before the join (see checkCardinality)
            sourceRows = sourceRowsPerKey(target, bound, right);
            right = Catalyst.make(Window.class, Catalyst.<NamedExpression>seq(sourceRows),
                Catalyst.seq(keyValues(target, bound)), Catalyst.<SortOrder>seq(), right);
        }
        JoinType type = bySource ? (notMatched ? FullOuter$.MODULE$ : LeftOuter$.MODULE$)
            : (notMatched ? RightOuter$.MODULE$ : Inner$.MODULE$);
        // a hash join built on the source's side: the target's rows are streamed, not sorted
        JoinHint hint = new JoinHint(Option.empty(),
            Option.apply(Catalyst.make(HintInfo.class, Option.apply(SHUFFLE_HASH$.MODULE$))));
        LogicalPlan rows = Catalyst.make(Join.class, left, right, type, Option.apply(m.mergeCondition()), hint);
        Expression hasTarget = new IsNotNull(targetMark.toAttribute().withNullability(true));
        Expression hasSource = new IsNotNull(sourceMark.toAttribute().withNullability(true));
        Clauses c = new Clauses(target, bound);
        c.isMatched = new And(hasTarget, hasSource);
        c.isNotMatched = new And(hasSource, new Not(hasTarget));
        c.isBySource = new And(hasTarget, new Not(hasSource));
        if (matched) {
            rows = checkCardinality(target, rows, sourceRows.toAttribute().withNullability(true), c.isMatched);
        }
        for (MergeAction a : Catalyst.list(m.matchedActions())) {
            c.add(a, c.isMatched, "WHEN MATCHED");
        }
        for (MergeAction a : Catalyst.list(m.notMatchedActions())) {
            c.add(a, c.isNotMatched, "WHEN NOT MATCHED");
        }
        for (MergeAction a : Catalyst.list(m.notMatchedBySourceActions())) {
            c.add(a, c.isBySource, "WHEN NOT MATCHED BY SOURCE");
        }
        return target.write(c.plan(rows));
    }

    private static scala.collection.immutable.Seq<NamedExpression> withMark(
            scala.collection.immutable.Seq<Attribute> output, Alias mark) {
        List<NamedExpression> out = new ArrayList<>(Catalyst.list(output));
        out.add(mark);
        return Catalyst.seq(out);
    }

    /** Key column (lower case) -> the source value the ON condition equates it with; anything else refused. */
    static Map<String, Expression> keyBinding(MergeIntoTable m, RowLevelRewrite.Target target) {
        AttributeSet targetColumns = m.targetTable().outputSet();
        Map<String, Expression> bound = new LinkedHashMap<>();
        String keys = String.join(", ", target.table().primaryKey());
        for (Expression c : conjuncts(m.mergeCondition())) {
            if (c instanceof EqualTo eq) {
                Attribute key = keyColumn(eq.left(), target, targetColumns);
                Expression value = eq.right();
                if (key == null || !onlySource(value, targetColumns)) {
                    key = keyColumn(eq.right(), target, targetColumns);
                    value = eq.left();
                }
                String column = key == null ? null : key.name().toLowerCase(Locale.ROOT);
                if (key != null && onlySource(value, targetColumns) && !bound.containsKey(column)) {
                    bound.put(column, value);
                    continue;
                }
            }
            throw target.error("the ON condition must bind the whole primary key (" + keys + ") with one "
                + "equality per key column to a source value (t.k = s.k AND ...) and nothing else; " + c.sql()
                + " is not such an equality. The statement's changes are applied by primary key; put other "
                + "conditions in the WHEN clauses (WHEN MATCHED AND ... THEN ...)");
        }
        List<String> missing = new ArrayList<>();
        for (String k : target.table().primaryKey()) {
            if (!bound.containsKey(k.toLowerCase(Locale.ROOT))) {
                missing.add(k);
            }
        }
        if (!missing.isEmpty()) {
            throw target.error("the ON condition must bind the whole primary key (" + keys + ") with one equality "
                + "per key column to a source value; it does not bind " + String.join(", ", missing)
                + ": a source row must name exactly one target row");
        }
        return bound;
    }

    private static List<Expression> conjuncts(Expression e) {
        List<Expression> out = new ArrayList<>();
        if (e instanceof And and) {
            out.addAll(conjuncts(and.left()));
            out.addAll(conjuncts(and.right()));
        } else {
            out.add(e);
        }
        return out;
    }

    private static Attribute keyColumn(Expression e, RowLevelRewrite.Target target, AttributeSet targetColumns) {
        Expression inner = RowLevelRewrite.strip(e);
        if (inner instanceof Attribute a && targetColumns.contains(a) && target.isKey(a.name())) {
            return a;
        }
        return null;
    }

    private static boolean onlySource(Expression e, AttributeSet targetColumns) {
        for (Attribute a : Catalyst.list(e.references())) {
            if (targetColumns.contains(a)) {
                return false;
            }
        }
        return true;
    }

    /** The source values the ON condition equates the key columns with, in key order. */
    private static List<Expression> keyValues(RowLevelRewrite.Target target, Map<String, Expression> bound) {
        List<Expression> out = new ArrayList<>();
        for (String k : target.table().primaryKey()) {
            out.add(bound.get(k.toLowerCase(Locale.ROOT)));
        }
        return out;
    }

    /** count(*) over the source rows of one key value (a window partitioned by the values the ON binds). */
    private static Alias sourceRowsPerKey(RowLevelRewrite.Target target, Map<String, Expression> bound,
                                          LogicalPlan source) {
        AggregateExpression count = Catalyst.make(AggregateExpression.class,
            new Count(Catalyst.<Expression>seq(Literal.create(1, DataTypes.IntegerType))), Complete$.MODULE$, false);
        WindowSpecDefinition spec = new WindowSpecDefinition(Catalyst.seq(keyValues(target, bound)),
            Catalyst.<SortOrder>seq(),
            new SpecifiedWindowFrame(RowFrame$.MODULE$, UnboundedPreceding$.MODULE$, UnboundedFollowing$.MODULE$));
        return Catalyst.alias(new WindowExpression(count, spec), "__merge_source_rows");
    }

    /**
     * Spark's MERGE rule: a target row matched by more than one source row fails the statement, naming its key.
     * The ON condition binds the whole key with equalities, so that is a matched row whose source key value has
     * more than one source row: counted on the source before the join ({@link #sourceRowsPerKey}: the source is
     * shuffled by those values for the join anyway), checked on the joined rows.
     */
    private static LogicalPlan checkCardinality(RowLevelRewrite.Target target, LogicalPlan rows,
                                                Attribute sourceRows, Expression isMatched) {
        List<Expression> message = new ArrayList<>();
        message.add(Catalyst.string("MERGE INTO " + target.name() + ": the target row with key "));
        for (String k : target.table().primaryKey()) {
            Attribute column = target.attribute(k);
            if (message.size() > 1) {
                message.add(Catalyst.string(", "));
            }
            message.add(Catalyst.string(column.name() + "="));
            message.add(new Coalesce(Catalyst.seq(Catalyst.cast(column, DataTypes.StringType),
                Catalyst.string("NULL"))));
        }
        message.add(Catalyst.string(" is matched by more than one source row: each target row may match at most "
            + "one (Spark's MERGE rule; MERGE_CARDINALITY_VIOLATION); remove the duplicate source rows of that key"));
        Expression duplicate = new And(isMatched,
            new GreaterThan(sourceRows, Literal.create(1L, DataTypes.LongType)));
        Expression fail = Catalyst.cast(new RaiseError(new Concat(Catalyst.seq(message))), DataTypes.BooleanType);
        return new Filter(new If(duplicate, fail, Literal.TrueLiteral()), rows);
    }

    /**
     * The WHEN clauses as one projection: per joined row, the change of the first clause that holds (a CASE over
     * the clauses in order, for the kind and for each column), or no row.
     */
    private static final class Clauses {
        private final RowLevelRewrite.Target target;
        private final Map<String, Expression> bound;
        private final List<Attribute> columns;
        private final List<Tuple2<Expression, Expression>> kinds = new ArrayList<>();
        private final List<List<Tuple2<Expression, Expression>>> values = new ArrayList<>();
        Expression isMatched;
        Expression isNotMatched;
        Expression isBySource;

        Clauses(RowLevelRewrite.Target target, Map<String, Expression> bound) {
            this.target = target;
            this.bound = bound;
            // as the join outputs them, where an outer join may have nulled them: declared nullable, so that the
            // write's resolution checks the NOT NULL columns (Spark updates the nullability only after it)
            this.columns = new ArrayList<>();
            for (Attribute column : target.columns()) {
                columns.add(column.withNullability(true));
            }
            for (int i = 0; i < columns.size(); i++) {
                values.add(new ArrayList<>());
            }
        }

        void add(MergeAction action, Expression kind, String clause) {
            Expression when = action.condition().isDefined() ? new And(kind, action.condition().get()) : kind;
            if (action instanceof DeleteAction) {
                kinds.add(new Tuple2<>(when, RowLevelRewrite.kind("-D")));
                for (int i = 0; i < columns.size(); i++) {   // the old row
                    values.get(i).add(new Tuple2<>(when, columns.get(i)));
                }
            } else if (action instanceof UpdateAction u) {
                Map<String, Expression> set = target.assigned(Catalyst.list(u.assignments()),
                    kind == isMatched ? bound : Map.of(), clause + " ... UPDATE SET");
                kinds.add(new Tuple2<>(when, RowLevelRewrite.kind("+U")));
                for (int i = 0; i < columns.size(); i++) {   // the new row: the old values where not set
                    Attribute column = columns.get(i);
                    Expression value = set.get(column.name().toLowerCase(Locale.ROOT));
                    values.get(i).add(new Tuple2<>(when,
                        value == null ? column : Catalyst.cast(value, column.dataType())));
                }
            } else if (action instanceof InsertAction ins) {
                Map<String, Expression> set = new LinkedHashMap<>();
                for (var a : Catalyst.list(ins.assignments())) {
                    if (a.key() instanceof Attribute key) {
                        set.put(key.name().toLowerCase(Locale.ROOT), a.value());
                    }
                }
                kinds.add(new Tuple2<>(when, RowLevelRewrite.kind("+I")));
                for (int i = 0; i < columns.size(); i++) {
                    Attribute column = columns.get(i);
                    Expression value = set.get(column.name().toLowerCase(Locale.ROOT));
                    values.get(i).add(new Tuple2<>(when,
                        value == null ? Catalyst.nullOf(column.dataType()) : Catalyst.cast(value, column.dataType())));
                }
            } else {
                throw target.error(clause + ": " + action.sql() + " is not supported");
            }
        }

        /** The change rows of {@code rows}: the projection, rows of no clause dropped. */
        LogicalPlan plan(LogicalPlan rows) {
            List<NamedExpression> out = new ArrayList<>();
            for (int i = 0; i < columns.size(); i++) {
                Attribute column = columns.get(i);
                out.add(Catalyst.alias(caseWhen(values.get(i), column), column.name()));
            }
            Alias kind = Catalyst.alias(caseWhen(kinds, null), ManagedScan.ROW_KIND);
            out.add(kind);
            return new Filter(new IsNotNull(kind.toAttribute()), new Project(Catalyst.seq(out), rows));
        }

        private static Expression caseWhen(List<Tuple2<Expression, Expression>> branches, Expression otherwise) {
            if (branches.isEmpty()) {
                return otherwise == null ? Catalyst.nullOf(DataTypes.StringType) : otherwise;
            }
            return new CaseWhen(Catalyst.seq(branches), Option.apply(otherwise));
        }
    }
}
