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
import tablestore.spark.jvm.mirror.BucketFunction;
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
 *
 * <p>A write Spark did not shuffle by bucket ({@code sink.shuffle-by-bucket} = false) has each task write every
 * bucket its rows fall in ({@link BucketFanOut}, given the table's bucket function).
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
    /** The table's bucket function when the tasks hold rows of any bucket; null: a bucket per task. */
    private final BucketFunction fanOut;

    private JvmBatchWrite(BatchWrite python, String planFile, StructType input, String table,
                          BucketFunction fanOut) {
        super(python);
        this.planFile = planFile;
        this.input = input;
        this.table = table;
        this.fanOut = fanOut;
    }

    /** {@code python}, written by the JVM where the plan in {@code planFile} allows (null: always Python). */
    public static BatchWrite of(BatchWrite python, String planFile, StructType input, String table) {
        return of(python, planFile, input, table, null);
    }

    /**
     * As above; {@code fanOut} (null: Spark gives each task one bucket's rows) is the table's bucket function when
     * Spark did not shuffle the rows by bucket.
     */
    public static BatchWrite of(BatchWrite python, String planFile, StructType input, String table,
                                BucketFunction fanOut) {
        return planFile == null ? python : new JvmBatchWrite(python, planFile, input, table, fanOut);
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
                LOG.info("table {}: written by the JVM writer{}", table,
                    fanOut == null ? "" : ", each task into every bucket (not shuffled by bucket)");
                return new Factory(plan, input, fanOut);
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
        private final BucketFunction fanOut;

        Factory(WritePlan plan, StructType input, BucketFunction fanOut) {
            this.plan = plan;
            this.input = input;
            this.fanOut = fanOut;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            return TaskErrors.writer(fanOut == null ? new BucketRunWriter(plan, input, partitionId)
                : new BucketFanOut(plan, input, partitionId, fanOut));
        }
    }
}
