package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.execution.datasources.v2.python.PythonWriterCommitMessage;

import tablestore.spark.jvm.DelegatingBatchWrite;
import tablestore.spark.jvm.DelegatingStreamingWrite;

/**
 * The commits (and aborts) of the Python data source's writes, run by a Python service process of this JVM
 * ({@link PythonService#commits}: tablestore/spark/catalog_service.py's {@code commit_stream_write} and
 * {@code commit_batch_write}) instead of by PySpark. PySpark commits in Python workers of modules of their own
 * (a micro-batch in two: one creates the data source, one runs the sink's commit; a batch write in one), and
 * PySpark 4.1 starts a daemon for each module on first use and charges about 0.1 s per call after that: the first
 * micro-batch of every query paid two Python starts (about 2.5 s together on 2 cores). The service's process is
 * started in the background when a streaming write is planned, while the first tasks run.
 *
 * <p>What a commit does is unchanged: a micro-batch's {@code ManagedStreamWriter} is built from the same options
 * and schema, a batch write's is PySpark's own writer (the pickle its planner made, which PySpark would hand its
 * commit worker; read from PySpark's batch write, else PySpark commits), and its {@code commit} or {@code abort}
 * runs with the tasks' commit messages (Python pickles, passed as they are). A commit request is never sent twice: a
 * process that died during a commit fails the write, and Spark's abort (which keeps the files of a commit whose
 * snapshot is in) and a query's restart follow, as when PySpark's worker died.
 */
final class ServiceCommit {
    /** The service action that commits or aborts a micro-batch. */
    static final String ACTION = "commit_stream_write";
    /** The service action that commits or aborts a batch write. */
    static final String BATCH_ACTION = "commit_batch_write";
    /** The service action that imports what a commit needs (run ahead of the first commit). */
    static final String PREPARE = "prepare_stream_commit";
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(ServiceCommit.class);

    private ServiceCommit() {
    }

    /** {@code python}'s write, its commits run by the service. */
    static Write write(Write python, LogicalWriteInfo info) {
        return new Write() {
            @Override
            public String description() {
                return python.description();
            }

            @Override
            public BatchWrite toBatch() {
                return new BatchCommitting(python.toBatch());
            }

            @Override
            public StreamingWrite toStreaming() {
                PythonService.commits().warm(PREPARE);
                return new Committing(python.toStreaming(), info);
            }

            @Override
            public CustomMetric[] supportedCustomMetrics() {
                return python.supportedCustomMetrics();
            }

            @Override
            public CustomTaskMetric[] reportDriverMetrics() {
                return python.reportDriverMetrics();
            }
        };
    }

    private static String base64(byte[] bytes) {
        return Base64.getEncoder().encodeToString(bytes);
    }

    /** Runs {@code action} once; its error as PySpark's commit worker's last line would say it ("Class: message"). */
    private static void request(String action, Map<String, Object> args) {
        try {
            PythonService.commits().request(action, args, false);
        } catch (PythonServiceException e) {
            throw new PythonServiceException(e.type(), e.type() + ": " + e.getMessage());
        }
    }

    private static List<String> pickles(WriterCommitMessage[] messages) {
        List<String> pickled = new ArrayList<>();
        for (WriterCommitMessage m : messages) {   // null: a task that failed or did not run
            pickled.add(m instanceof PythonWriterCommitMessage
                ? base64(((PythonWriterCommitMessage) m).pickledMessage()) : null);
        }
        return pickled;
    }

    /** A batch write whose job commit and abort the service runs with PySpark's pickled writer. */
    private static final class BatchCommitting extends DelegatingBatchWrite {
        BatchCommitting(BatchWrite python) {
            super(python);
        }

        @Override
        public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo physical) {
            return python.createBatchWriterFactory(physical);
        }

        @Override
        public void commit(WriterCommitMessage[] messages) {
            byte[] writer = pythonWriter();
            if (writer == null) {
                python.commit(messages);
            } else {
                run(writer, messages, false);
            }
        }

        @Override
        public void abort(WriterCommitMessage[] messages) {
            byte[] writer = pythonWriter();
            if (writer == null) {
                python.abort(messages);
            } else {
                run(writer, messages, true);
            }
        }

        private void run(byte[] writer, WriterCommitMessage[] messages, boolean abort) {
            Map<String, Object> args = new LinkedHashMap<>();
            args.put("writer", base64(writer));
            args.put("messages", pickles(messages));
            args.put("abort", abort);
            request(BATCH_ACTION, args);
        }

        /** The writer PySpark's planner pickled (PythonBatchWrite's field), null where this Spark has none. */
        private byte[] pythonWriter() {
            try {
                java.lang.reflect.Field field = python.getClass().getDeclaredField("pythonDataSourceWriter");
                field.setAccessible(true);
                Object value = field.get(python);
                return value instanceof byte[] ? (byte[]) value : null;
            } catch (ReflectiveOperationException | RuntimeException e) {
                LOG.debug("the Python writer of {} is not readable: PySpark commits", python, e);
                return null;
            }
        }
    }

    private static final class Committing extends DelegatingStreamingWrite {
        private final LogicalWriteInfo info;

        Committing(StreamingWrite python, LogicalWriteInfo info) {
            super(python);
            this.info = info;
        }

        @Override
        public void commit(long epochId, WriterCommitMessage[] messages) {
            run(epochId, messages, false);
        }

        @Override
        public void abort(long epochId, WriterCommitMessage[] messages) {
            run(epochId, messages, true);
        }

        private void run(long epochId, WriterCommitMessage[] messages, boolean abort) {
            Map<String, Object> args = new LinkedHashMap<>();
            args.put("options", info.options().asCaseSensitiveMap());
            args.put("schema", info.schema().json());
            args.put("epoch", epochId);
            args.put("messages", pickles(messages));
            args.put("abort", abort);
            request(ACTION, args);
        }
    }
}
