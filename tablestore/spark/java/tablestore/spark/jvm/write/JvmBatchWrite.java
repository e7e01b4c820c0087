package tablestore.spark.jvm.write;

import java.util.Map;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;

import tablestore.spark.jvm.DelegatingBatchWrite;
import tablestore.spark.jvm.TaskErrors;
import tablestore.spark.jvm.mirror.Contract;

/**
 * A batch write whose tasks are written by the JVM twin of the file store's writer ({@link BucketRunWriter}) where
 * it applies, else by Python: the write Spark clusters one bucket per task, of a table Python's planning found fit
 * (tablestore/spark/jvm_write.py: a primary key of one integer column, no partition columns, Parquet files, column
 * types the JVM writer writes, a local warehouse or, with S3A on the class path, one on S3: {@link
 * tablestore.spark.jvm.HadoopFiles}), rows with exactly the table's columns and types.
 *
 * <p>Protocol (tablestore/spark/write.py, step 2'): the write's options carry {@value #PLAN_OPTION} = a file path
 * of this JVM's. {@link #createBatchWriterFactory} first asks the Python batch write for its factory, which creates
 * the Python writer on the driver (ManagedWriter.__init__: it fixes the base snapshot and writes the plan there),
 * then reads the plan ({@link WritePlan}): usable and fitting the rows, the tasks run {@link BucketRunWriter} and
 * hand Python's commit a pickled {@code JvmTaskCommit}; otherwise Python's factory, as before. Commit and abort are
 * the Python batch write's (one snapshot per job, the files deleted on abort).
 */
public final class JvmBatchWrite extends DelegatingBatchWrite {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(JvmBatchWrite.class);
    /** The option naming the plan file: tablestore/spark/jvm_write.py's PLAN_OPTION. */
    public static final String PLAN_OPTION = Contract.JVM_WRITE_PLAN_OPTION;
    /** The write option turning the JVM writer off ({@code false}): tablestore/spark/jvm_write.py's SWITCH. */
    public static final String SWITCH_OPTION = Contract.JVM_WRITER_OPTION;

    private final String planFile;
    private final StructType input;
    private final String table;

    private JvmBatchWrite(BatchWrite python, String planFile, StructType input, String table) {
        super(python);
        this.planFile = planFile;
        this.input = input;
        this.table = table;
    }

    /** {@code python}, written by the JVM where the plan in {@code planFile} allows (null: always Python). */
    public static BatchWrite of(BatchWrite python, String planFile, StructType input, String table) {
        return planFile == null ? python : new JvmBatchWrite(python, planFile, input, table);
    }

    /** The write options that ask Python for a plan ({@link #PLAN_OPTION}), unless the switch is off. */
    public static String planFile(Map<String, String> options) {
        for (Map.Entry<String, String> e : options.entrySet()) {
            if (e.getKey().equalsIgnoreCase(SWITCH_OPTION) && e.getValue().trim().equalsIgnoreCase("false")) {
                return null;
            }
        }
        return tablestore.spark.jvm.read.RawSplits.newPlanFile();
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
        DataWriterFactory pythons = python.createBatchWriterFactory(info);   // Python plans: writes the plan
        StringBuilder why = new StringBuilder();
        WritePlan plan = WritePlan.read(planFile, why);
        if (plan != null) {
            String misfit = plan.bind(input, SQLConf.get().caseSensitiveAnalysis());
            if (misfit == null) {
                LOG.info("table {}: written by the JVM writer", table);
                return new Factory(plan, input);
            }
            why.append(misfit);
        }
        LOG.info("table {}: written by Python: {}", table, why);
        return pythons;
    }

    private static final class Factory implements DataWriterFactory {
        private static final long serialVersionUID = 1L;
        private final WritePlan plan;
        private final StructType input;

        Factory(WritePlan plan, StructType input) {
            this.plan = plan;
            this.input = input;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            return TaskErrors.writer(new BucketRunWriter(plan, input, partitionId));
        }
    }
}
