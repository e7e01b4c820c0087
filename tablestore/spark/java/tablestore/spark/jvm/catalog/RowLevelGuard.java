package tablestore.spark.jvm.catalog;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.UpdateTable;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;

/**
 * UPDATE and MERGE INTO on a managed table fail at analysis with the reason and the alternative
 * (docs/spark-sql-ops.md, "UPDATE and MERGE INTO"): Spark's row-level operations cannot hand the Python writer
 * a changelog it can commit safely, and on a primary-key table INSERT INTO is an upsert.
 */
final class RowLevelGuard extends Rule<LogicalPlan> {
    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        String statement;
        LogicalPlan target;
        if (plan instanceof UpdateTable) {
            statement = "UPDATE";
            target = ((UpdateTable) plan).table();
        } else if (plan instanceof MergeIntoTable) {
            statement = "MERGE INTO";
            target = ((MergeIntoTable) plan).targetTable();
        } else {
            return plan;
        }
        while (target instanceof SubqueryAlias) {
            target = ((SubqueryAlias) target).child();
        }
        if (target instanceof DataSourceV2Relation
                && ((DataSourceV2Relation) target).table() instanceof ManagedTable) {
            String table = ((DataSourceV2Relation) target).table().name();
            throw Errors.unchecked(new PythonServiceException("UnsupportedOperation", statement
                + " is not supported on managed table " + table + ": Spark's row-level operations do not reach the "
                + "Python writer as a changelog it can commit safely (see docs/spark-sql-ops.md, "
                + "\"UPDATE and MERGE INTO\"). "
                + "On a primary-key table INSERT INTO " + table + " SELECT ... is an upsert: write the updated rows "
                + "with their primary key; DELETE FROM " + table + " WHERE ... deletes rows."));
        }
        return plan;
    }
}
