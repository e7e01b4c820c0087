package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.spark.SparkThrowable;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.codegen.Block;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.FalseLiteral$;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.catalyst.expressions.objects.AssertNotNull;
import org.apache.spark.sql.catalyst.plans.logical.Expand;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.V2WriteCommand;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;

import scala.runtime.AbstractFunction1;

/**
 * A null written by SQL ({@code INSERT INTO managed.db.t VALUES (null, ...)}, {@code INSERT ... SELECT},
 * {@code df.writeTo(...)}, a MERGE INTO's insert) into a NOT NULL column of a managed table (every primary-key column
 * is one) fails with one line naming the table and the column, the line a {@code df.write.format("managed")} of the
 * same rows gives: {@code InvalidWriteError: table 'db.t': primary-key column 'id' has nulls}.
 *
 * <p>Spark's own check (the {@code AssertNotNull} its analysis puts around a nullable value written into a NOT NULL
 * column) says {@code NOT_NULL_ASSERT_VIOLATION} in three lines that name the column but not the table. This
 * post-hoc resolution rule replaces each such check of a whole column in the plan of a write into a managed table
 * (the INSERT's projection {@code AssertNotNull(value) AS column}, a MERGE's or UPDATE's assigned values) with
 * {@link Check}, the same check with the table's message. Its error ({@link NullValueError}) is a SparkThrowable with
 * a condition, so Spark hands it to the caller as it is when a task throws it (a task's other exceptions become a
 * "Job aborted due to stage failure" of a hundred lines), and an IllegalArgumentException, which PySpark raises with
 * its message as the text. Checks of nested fields stay Spark's.
 */
public final class NotNullColumns extends Rule<LogicalPlan> {
    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (!(plan instanceof V2WriteCommand write) || !(write.table() instanceof DataSourceV2Relation relation)) {
            return plan;
        }
        ManagedTable table = relation.table() instanceof ManagedTable t ? t   // INSERT, writeTo
            : relation.table() instanceof RowChangesTable changes ? changes.table() : null;   // MERGE INTO, UPDATE
        if (table == null) {
            return plan;
        }
        String name = table.tableName();
        Map<String, String> messages = new HashMap<>();
        for (StructField f : table.schema().fields()) {
            boolean key = table.primaryKey().stream().anyMatch(k -> k.equalsIgnoreCase(f.name()));
            messages.put(f.name().toLowerCase(Locale.ROOT), message(name, f.name(), key));
        }
        LogicalPlan query = rewrite(write.query(), messages);
        return query == write.query() ? plan : (LogicalPlan) write.withNewQuery(query);
    }

    /**
     * {@code plan} with every AssertNotNull of a whole column of the table made a {@link Check} with its message
     * ({@code messages}, by column): the column is the check's path (Spark's output resolution) or, for a check
     * without one (a MERGE's assigned values), the column the expression gives, by its alias in a Project or its
     * position in an Expand (the MERGE's change rows, {@link RowLevelRewrite#changeRows}).
     */
    private static LogicalPlan rewrite(LogicalPlan plan, Map<String, String> messages) {
        List<LogicalPlan> children = new ArrayList<>();
        boolean changed = false;
        for (LogicalPlan child : Catalyst.list(plan.children())) {
            LogicalPlan rewritten = rewrite(child, messages);
            changed |= rewritten != child;
            children.add(rewritten);
        }
        LogicalPlan out = changed ? plan.withNewChildren(Catalyst.seq(children)) : plan;
        if (out instanceof Project project) {
            List<NamedExpression> columns = new ArrayList<>();
            boolean any = false;
            for (NamedExpression column : Catalyst.list(project.projectList())) {
                if (column instanceof Alias alias) {
                    Expression value = rewrite(alias.child(), messages, alias.name());
                    any |= value != alias.child();
                    column = (NamedExpression) alias.withNewChildren(Catalyst.seq(value));
                }
                columns.add(column);
            }
            return any ? new Project(Catalyst.seq(columns), project.child()) : out;
        }
        if (out instanceof Expand expand) {
            List<Attribute> output = Catalyst.list(expand.output());
            List<scala.collection.immutable.Seq<Expression>> rows = new ArrayList<>();
            boolean any = false;
            for (scala.collection.Seq<Expression> row : Catalyst.list(expand.projections())) {
                List<Expression> values = new ArrayList<>();
                List<Expression> given = Catalyst.list(row);
                for (int i = 0; i < given.size(); i++) {
                    values.add(rewrite(given.get(i), messages, output.get(i).name()));
                    any |= values.get(i) != given.get(i);
                }
                rows.add(Catalyst.seq(values));
            }
            return any ? new Expand(Catalyst.seq(rows), expand.output(), expand.child()) : out;
        }
        return (LogicalPlan) out.mapExpressions(new AbstractFunction1<Expression, Expression>() {
            @Override
            public Expression apply(Expression e) {
                return rewrite(e, messages, null);
            }
        });
    }

    /** {@code e} with its AssertNotNulls of whole columns made Checks; {@code column}: the column {@code e} gives. */
    private static Expression rewrite(Expression e, Map<String, String> messages, String column) {
        List<Expression> children = new ArrayList<>();
        boolean changed = false;
        for (Expression child : Catalyst.list(e.children())) {
            Expression rewritten = rewrite(child, messages, column);
            changed |= rewritten != child;
            children.add(rewritten);
        }
        Expression out = changed ? e.withNewChildren(Catalyst.seq(children)) : e;
        if (out instanceof AssertNotNull check && check.walkedTypePath().size() <= 1) {
            String of = check.walkedTypePath().isEmpty() ? column : check.walkedTypePath().head();
            String message = of == null ? null : messages.get(of.toLowerCase(Locale.ROOT));
            if (message != null) {   // a whole column's check (a nested field's path is longer)
                return new Check(check.child(), message);
            }
        }
        return out;
    }

    /** The writers' message (filestore/write.py, BucketRunWriter.java) for a null in {@code column}. */
    static String message(String table, String column, boolean key) {
        return "InvalidWriteError: table '" + table + "': " + (key ? "primary-key column '" + column + "' has nulls"
            : "column '" + column + "' is NOT NULL and has nulls");
    }

    /** A null in a NOT NULL column of a managed table's write, as one line (see the class comment). */
    public static final class NullValueError extends IllegalArgumentException implements SparkThrowable {
        private static final long serialVersionUID = 1L;

        NullValueError(String message) {
            super(message);
        }

        @Override
        public String getCondition() {
            return "NOT_NULL_ASSERT_VIOLATION";   // Spark's condition of the check this one replaces
        }
    }

    /** Called by {@link Check}'s generated code. */
    public static NullValueError error(String message) {
        return new NullValueError(message);
    }

    /**
     * {@code child}'s value, or {@link NullValueError} with {@code message} when it is null: Spark's AssertNotNull
     * with another error. (An Expression of its own: javac refuses a subclass of Spark's UnaryExpression.)
     */
    public static final class Check extends Expression implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        private final Expression child;
        private final String message;

        public Check(Expression child, String message) {
            this.child = child;
            this.message = message;
        }

        @Override
        public scala.collection.immutable.Seq<Expression> children() {
            return Catalyst.seq(child);
        }

        @Override
        public Expression withNewChildrenInternal(scala.collection.immutable.IndexedSeq<Expression> children) {
            return new Check(children.apply(0), message);
        }

        @Override
        public DataType dataType() {
            return child.dataType();
        }

        @Override
        public boolean nullable() {
            return false;
        }

        @Override
        public boolean foldable() {
            return false;   // checked as each row is written, as Spark's AssertNotNull
        }

        @Override
        public Object eval(InternalRow input) {
            Object value = child.eval(input);
            if (value == null) {
                throw error(message);
            }
            return value;
        }

        @Override
        public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
            ExprCode value = child.genCode(ctx);
            String text = ctx.addReferenceObj("nullValueMessage", message, String.class.getName());
            Block check = new CodeBlock(Catalyst.seq("\nif (", ") {\n  throw " + NotNullColumns.class.getName()
                + ".error(" + text + ");\n}\n"), Catalyst.<JavaCode>seq(value.isNull()));
            return new ExprCode(value.code().$plus(check), FalseLiteral$.MODULE$, value.value());
        }

        @Override
        public String prettyName() {
            return "assert_not_null";
        }

        @Override
        public int productArity() {
            return 2;
        }

        @Override
        public Object productElement(int n) {
            return n == 0 ? child : message;
        }

        @Override
        public boolean canEqual(Object other) {
            return other instanceof Check;
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof Check c && c.child.equals(child) && c.message.equals(message);
        }

        @Override
        public int hashCode() {
            return child.hashCode() * 31 + message.hashCode();
        }
    }
}
