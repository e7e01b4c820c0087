package tablestore.spark.jvm.catalog;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

/**
 * {@code spark.sql.extensions} of the managed catalog: SQL syntax beyond Spark's own grammar
 * ({@code DESCRIBE DETAIL}, {@code ALTER TABLE ... COMPACT}: {@link ManagedParser}), and MERGE INTO and UPDATE on
 * managed tables, rewritten into a changelog write once resolved ({@link RowLevelRewrite}); a null written into a
 * NOT NULL column of a managed table fails with one line naming the table and the column ({@link NotNullColumns}).
 */
public class ManagedExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectParser(new AbstractFunction2<SparkSession, ParserInterface, ParserInterface>() {
            @Override
            public ParserInterface apply(SparkSession session, ParserInterface delegate) {
                return ManagedParser.wrap(session, delegate);
            }
        });
        extensions.injectResolutionRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new RowLevelRewrite();
            }
        });
        extensions.injectPostHocResolutionRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(SparkSession session) {
                return new NotNullColumns();
            }
        });
        return BoxedUnit.UNIT;
    }
}
