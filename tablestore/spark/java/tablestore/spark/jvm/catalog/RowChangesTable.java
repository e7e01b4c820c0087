package tablestore.spark.jvm.catalog;

import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * What a MERGE INTO or UPDATE of a managed table writes ({@link RowLevelRewrite}): the table's columns and
 * {@code _row_kind} ({@code +I}, {@code -U}, {@code +U}, {@code -D}), through the table's own write (one writer per
 * bucket, the Python writer's changelog path, the log). Spark aligns the rewritten plan's columns to this schema by
 * name, as for an INSERT.
 */
final class RowChangesTable implements SupportsWrite {
    private final ManagedTable table;

    RowChangesTable(ManagedTable table) {
        this.table = table;
    }

    /** The managed table the changes go to. */
    ManagedTable table() {
        return table;
    }

    @Override
    public String name() {
        return table.name();
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
        return table.schema().add(ManagedScan.ROW_KIND, DataTypes.StringType, false);
    }

    @Override
    public Transform[] partitioning() {
        return table.partitioning();
    }

    @Override
    public Map<String, String> properties() {
        return table.properties();
    }

    @Override
    public Set<TableCapability> capabilities() {
        return Set.of(TableCapability.BATCH_WRITE);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        return new ManagedWriteBuilder(table, info);
    }
}
