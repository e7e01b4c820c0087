package tablestore.spark.jvm;

import java.util.Properties;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;

/**
 * A Python data source's batch write whose tasks hand Python larger Arrow batches than the session's default.
 *
 * <p>Spark's Python writer (PythonBatchWriterFactory) sends a task's rows to the Python worker in Arrow batches of
 * {@code spark.sql.execution.arrow.maxRecordsPerBatch} rows (10,000 by default), read from the task's SQL conf
 * when the task starts. Per batch both sides pay a fixed cost (vectors allocated and an IPC message written in the
 * JVM, a message decoded in Python, a chunk more for every Arrow call of the file store's writer): at 10,000 rows
 * a 5M-row write spends about 2 s of CPU more than at {@link #ROWS} (bench/spark_datasource_bench.py). This
 * wrapper sets the conf in the task's local properties (what an executor's SQL conf reads) for the write task
 * only, before the Python writer starts; a value the user set in the session is kept. The task's tablestore errors
 * reach the driver as their own line ({@link TaskErrors}). Every other call goes to the Python write unchanged.
 */
public final class WriteBatches extends DelegatingBatchWrite {
    /** Rows per Arrow batch of a write task (tablestore.spark.write.WRITE_CHUNK_ROWS gathers 256k). */
    public static final int ROWS = 100_000;
    static final String CONF = "spark.sql.execution.arrow.maxRecordsPerBatch";

    private WriteBatches(BatchWrite python) {
        super(python);
    }

    /** {@code python} with larger Arrow batches per write task. */
    public static BatchWrite of(BatchWrite python) {
        return new WriteBatches(python);
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
        try {   // the Python writer's option and table errors, as their line
            return new Factory(python.createBatchWriterFactory(info));
        } catch (Exception e) {   // AnalysisException is checked in Java's eyes
            throw TaskErrors.driver(e);
        }
    }

    /** Sets the batch size of the task (executor side), then creates the Python writer. */
    private static final class Factory implements DataWriterFactory {
        private static final long serialVersionUID = 1L;
        private final DataWriterFactory python;

        Factory(DataWriterFactory python) {
            this.python = python;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            TaskContext context = TaskContext.get();
            if (context != null) {
                Properties local = context.getLocalProperties();   // the task's own copy
                if (local.getProperty(CONF) == null) {   // unset in the session: Spark's default
                    local.setProperty(CONF, Integer.toString(ROWS));
                }
            }
            return TaskErrors.writer(python.createWriter(partitionId, taskId));
        }
    }
}
