package tablestore.spark.jvm;

import java.io.IOException;
import java.util.regex.MatchResult;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.spark.QueryContext;
import org.apache.spark.api.python.PythonException;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

import scala.Option;

/**
 * The tablestore errors of a write task (a null primary key, a column whose type does not fit: the Python library's
 * InvalidWriteError and SchemaMismatchError, or the JVM writer's same checks), as the one line a user reads.
 *
 * <p>A task's exception reaches the driver inside Spark's "Job aborted due to stage failure" with every stack in its
 * text: PySpark shows a Py4JJavaError of a hundred lines or more, whose first line names neither table nor column.
 * So a task that meets a tablestore error does not fail:
 * <ol>
 *   <li>its writer ({@link #writer}) catches the error, aborts the task's own writer (the JVM writer deletes its
 *       files) and commits a {@link Failed} message carrying the error's line instead;</li>
 *   <li>the job's commit on the driver ({@link tablestore.spark.jvm.DelegatingBatchWrite}) finds it, commits nothing
 *       and throws {@link TableStoreTaskError} (a PythonException; on Spark 4.1 an IllegalArgumentException, which
 *       PySpark 4.1 shows as its message) whose message is that line, e.g.
 *       {@code InvalidWriteError: table 'db.t': primary-key column 'id' has nulls};</li>
 *   <li>Spark then aborts the job (the Python write deletes the other tasks' files, {@link #withoutFailed}) and
 *       hands the error on as it is; PySpark raises it as a PythonException with that message.</li>
 * </ol>
 * Any other error fails its task as before (Spark may retry it).
 */
public final class TaskErrors {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(TaskErrors.class);
    /** The last line of a Python traceback that is a tablestore error: its class name and message. */
    private static final Pattern TABLESTORE_ERROR = Pattern.compile(
        "^(?:filestore|catalog|logstore|tablestore)(?:\\.\\w+)*\\.(\\w+Error): (.+)$", Pattern.MULTILINE);

    private TaskErrors() {
    }

    /** The commit message of a task that met a tablestore error: the error's line. */
    public static final class Failed implements WriterCommitMessage {
        private static final long serialVersionUID = 1L;
        private final String message;

        Failed(String message) {
            this.message = message;
        }

        public String message() {
            return message;
        }
    }

    /** The error {@code error} ("InvalidWriteError") with {@code message}, caused by {@code cause}. */
    public static TableStoreTaskError of(String error, String message, Throwable cause) {
        return new TableStoreTaskError(error + ": " + message, cause);
    }

    /** {@code e} as the tablestore error it reports (a Python worker's traceback ending in one), else null. */
    static TableStoreTaskError translate(Throwable e) {
        if (e instanceof TableStoreTaskError) {
            return (TableStoreTaskError) e;
        }
        if (!(e instanceof PythonException)) {
            return null;
        }
        String text = TableStoreTaskError.traceback((PythonException) e);   // per Spark version
        MatchResult last = null;
        Matcher m = TABLESTORE_ERROR.matcher(text);
        while (m.find()) {
            last = m.toMatchResult();
        }
        return last == null ? null : of(last.group(1), last.group(2).trim(), e);
    }

    /**
     * An error of the Python source on the driver (Spark's {@code PYTHON_DATA_SOURCE_ERROR}: "Failed to create Python
     * data source instance" and the whole traceback) that is a tablestore error, e.g. an unknown option: an
     * AnalysisException whose message is the error's line, caused by {@code e}; any other error as it is.
     */
    public static RuntimeException driver(Throwable e) {
        MatchResult last = null;
        Matcher m = TABLESTORE_ERROR.matcher(String.valueOf(e.getMessage()));
        while (m.find()) {
            last = m.toMatchResult();
        }
        if (!(e instanceof AnalysisException) || last == null) {
            return sneaky(e);
        }
        String line = last.group(2).replaceAll("\\s*SQLSTATE: \\w+\\s*$", "").trim();
        return sneaky(new AnalysisException(last.group(1) + ": " + line, Option.empty(), Option.empty(),
            Option.apply(e), Option.empty(), scala.collection.immutable.Map$.MODULE$.empty(), new QueryContext[0]));
    }

    /** Thrown unchecked, as Spark itself throws AnalysisException from APIs that cannot declare it. */
    @SuppressWarnings("unchecked")
    private static <T extends Throwable> RuntimeException sneaky(Throwable t) throws T {
        throw (T) t;
    }

    /** Step 2: the first failed task's error, thrown; nothing when every task wrote. */
    public static void throwIfFailed(WriterCommitMessage[] messages) {
        for (WriterCommitMessage m : messages) {
            if (m instanceof Failed) {
                throw new TableStoreTaskError(((Failed) m).message(), null);
            }
        }
    }

    /** Step 3: the messages without the failed tasks' (null, as Spark gives a task that committed nothing). */
    public static WriterCommitMessage[] withoutFailed(WriterCommitMessage[] messages) {
        WriterCommitMessage[] out = messages.clone();
        for (int i = 0; i < out.length; i++) {
            if (out[i] instanceof Failed) {
                out[i] = null;
            }
        }
        return out;
    }

    /** {@code python}'s write, its tasks' tablestore errors reported as their line (batch and streaming). */
    public static Write write(Write python) {
        return new Write() {
            @Override
            public String description() {
                return python.description();
            }

            @Override
            public BatchWrite toBatch() {
                BatchWrite batch = python.toBatch();
                return new DelegatingBatchWrite(batch) {
                    @Override
                    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
                        DataWriterFactory tasks;
                        try {
                            tasks = batch.createBatchWriterFactory(info);
                        } catch (Exception e) {   // the Python writer's option and table errors, as their line
                            throw driver(e);
                        }
                        return (DataWriterFactory) (partition, task) -> writer(tasks.createWriter(partition, task));
                    }
                };
            }

            @Override
            public StreamingWrite toStreaming() {
                return streaming(python.toStreaming());
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

    /**
     * {@code python}'s streaming write, each micro-batch's tasks' tablestore errors reported as their line: steps 1-3
     * per micro-batch (epoch), as for a batch write. The query then stops with Spark's StreamingQueryException
     * caused by {@link TableStoreTaskError}, whose message holds the line instead of the Python traceback; nothing
     * of the micro-batch is committed (Python's abort deletes the files of the tasks that wrote).
     */
    public static StreamingWrite streaming(StreamingWrite python) {
        if (python instanceof ReportingStreamingWrite) {
            return python;
        }
        return new ReportingStreamingWrite(python);
    }

    private static final class ReportingStreamingWrite extends DelegatingStreamingWrite {
        ReportingStreamingWrite(StreamingWrite python) {
            super(python);
        }

        @Override
        public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
            StreamingDataWriterFactory tasks;
            try {
                tasks = python.createStreamingWriterFactory(info);
            } catch (Exception e) {   // the Python writer's option and table errors, as their line
                throw driver(e);
            }
            return (StreamingDataWriterFactory) (partition, task, epoch) ->
                writer(tasks.createWriter(partition, task, epoch));
        }

        @Override
        public void commit(long epochId, WriterCommitMessage[] messages) {
            throwIfFailed(messages);
            python.commit(epochId, messages);
        }

        @Override
        public void abort(long epochId, WriterCommitMessage[] messages) {
            python.abort(epochId, withoutFailed(messages));
        }
    }

    /** Step 1: {@code writer}, its tablestore errors turned into a {@link Failed} commit. */
    public static DataWriter<InternalRow> writer(DataWriter<InternalRow> writer) {
        return new DataWriter<InternalRow>() {
            private Failed failed;

            private void fail(RuntimeException e) throws IOException {
                TableStoreTaskError error = translate(e);
                if (error == null) {
                    throw e;
                }
                LOG.warn("write task failed: {}", error.getMessage(), e);
                failed = new Failed(error.getMessage());
                writer.abort();
            }

            @Override
            public void write(InternalRow row) throws IOException {
                if (failed != null) {
                    return;
                }
                try {
                    writer.write(row);
                } catch (RuntimeException e) {
                    fail(e);
                }
            }

            @Override
            public void writeAll(java.util.Iterator<InternalRow> rows) throws IOException {
                try {
                    writer.writeAll(rows);
                } catch (RuntimeException e) {
                    fail(e);
                }
            }

            @Override
            public WriterCommitMessage commit() throws IOException {
                if (failed != null) {
                    return failed;
                }
                try {
                    return writer.commit();
                } catch (RuntimeException e) {
                    fail(e);
                    return failed;
                }
            }

            @Override
            public void abort() throws IOException {
                if (failed == null) {
                    writer.abort();
                }
            }

            @Override
            public void close() throws IOException {
                writer.close();
            }
        };
    }
}
