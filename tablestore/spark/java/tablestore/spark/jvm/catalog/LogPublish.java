package tablestore.spark.jvm.catalog;

import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import tablestore.spark.jvm.DelegatingBatchWrite;
import tablestore.spark.jvm.DelegatingStreamingWrite;
import tablestore.spark.jvm.TaskErrors;
import tablestore.spark.jvm.read.RawSplits;
import tablestore.spark.jvm.mirror.Contract;

/**
 * The log of a {@code managed} write produced by the executors after the Python commit (the protocol is
 * tablestore/spark/log_publish.py's): the write's options name a file ({@value #PLAN_OPTION}) where the Python
 * commit leaves the plans of the table's pending logs; after that commit returns, one Spark job reads the
 * {@code managed} source with {@value #READ_OPTION} = that file (a task per pending snapshot and bucket produces the
 * bucket's records), and the catalog service records the offsets.
 */
public final class LogPublish {
    /** tablestore/spark/log_publish.py's PLAN_OPTION. */
    public static final String PLAN_OPTION = Contract.LOG_PUBLISH_PLAN_OPTION;
    /** tablestore/spark/log_publish.py's READ_OPTION. */
    public static final String READ_OPTION = Contract.LOG_PUBLISH_READ_OPTION;

    private LogPublish() {
    }

    /** Session setting: who produces a Spark write's log (tablestore/spark/log_publish.py's PRODUCERS_CONF). */
    public static final String PRODUCERS_CONF = Contract.LOG_PRODUCERS_CONF;

    /**
     * The plan file path of a write (the file is written by Python, if at all): one per query, since Spark builds
     * a streaming query's write again for every micro-batch while its Python writer keeps the options of the
     * first. Null when the driver produces the log ({@value #PRODUCERS_CONF} = {@code driver}, or {@code auto},
     * the default, in a local session, whose executors are the driver: there the log job would only add a job).
     */
    public static String planFile(LogicalWriteInfo info) {
        SparkSession spark = SparkSession.active();
        String producers = spark.conf().get(PRODUCERS_CONF, "auto").trim().toLowerCase(java.util.Locale.ROOT);
        switch (producers) {
            case "executors":
                break;
            case "driver":
                return null;
            case "auto":
                if (spark.sparkContext().isLocal()) {
                    return null;
                }
                break;
            default:
                throw new IllegalArgumentException(PRODUCERS_CONF + " must be auto, executors or driver, not '"
                    + producers + "'");
        }
        return RawSplits.planFile("log-" + info.queryId().replaceAll("[^A-Za-z0-9_-]", "_"));
    }

    /**
     * After a commit: publishes the plans Python left in {@code planFile}, if it left any. {@code options}: the
     * write's (the table, its warehouse and the session's catalog options, which the read takes over).
     */
    static void publish(String planFile, Map<String, String> options) {
        File file = new File(planFile);
        if (!file.exists()) {
            return;
        }
        try {
            Map<String, String> read = new HashMap<>();
            options.forEach((k, v) -> {
                if (!k.startsWith("__")) {
                    read.put(k, v);
                }
            });
            read.put(READ_OPTION, planFile);
            Row[] rows = (Row[]) SparkSession.active().read().format("managed").options(read).load().collect();
            List<List<Object>> published = new ArrayList<>();
            for (Row row : rows) {
                published.add(Arrays.asList(row.get(0), row.get(1), row.get(2)));
            }
            Map<String, Object> args = new LinkedHashMap<>();
            args.put("plan", planFile);
            args.put("published", published);
            PythonService.call("record_log_published", args);
        } finally {
            file.delete();
        }
    }

    /** {@code options} with the plan file Python's commit writes to. */
    static Map<String, String> withPlan(Map<String, String> options, String planFile) {
        Map<String, String> out = new HashMap<>(options);
        out.put(PLAN_OPTION, planFile);
        return out;
    }

    /** The Python write {@code python} builds for {@code info} (with the plan option), its commits publishing. */
    public static WriteBuilder builder(Function<LogicalWriteInfo, WriteBuilder> python, LogicalWriteInfo info) {
        return new Builder(python, info);
    }

    /** {@code python}, whose options carry {@code planFile}, with its commits followed by the log job. */
    static Write write(Write python, String planFile, Map<String, String> options) {
        return new PublishingWrite(python, planFile, options);
    }

    static BatchWrite batch(BatchWrite python, String planFile, Map<String, String> options) {
        return new DelegatingBatchWrite(python) {
            @Override
            public org.apache.spark.sql.connector.write.DataWriterFactory createBatchWriterFactory(
                    PhysicalWriteInfo info) {
                return python.createBatchWriterFactory(info);
            }

            @Override
            public void commit(WriterCommitMessage[] messages) {
                python.commit(messages);
                publish(planFile, options);
            }
        };
    }

    static StreamingWrite streaming(StreamingWrite python, String planFile, Map<String, String> options) {
        return new DelegatingStreamingWrite(python) {
            @Override
            public void commit(long epochId, WriterCommitMessage[] messages) {
                python.commit(epochId, messages);
                publish(planFile, options);
            }
        };
    }

    private static final class Builder implements SupportsTruncate {
        private final Function<LogicalWriteInfo, WriteBuilder> python;
        private final LogicalWriteInfo info;
        private boolean truncate = false;

        Builder(Function<LogicalWriteInfo, WriteBuilder> python, LogicalWriteInfo info) {
            this.python = python;
            this.info = info;
        }

        @Override
        public WriteBuilder truncate() {
            truncate = true;
            return this;
        }

        /** The write, its tasks' tablestore errors reaching the driver as their line ({@link TaskErrors}). */
        @Override
        public Write build() {
            String planFile = planFile(info);
            if (planFile == null) {
                WriteBuilder builder = python.apply(info);
                return TaskErrors.write((truncate ? ((SupportsTruncate) builder).truncate() : builder).build());
            }
            Map<String, String> options = withPlan(info.options().asCaseSensitiveMap(), planFile);
            WriteBuilder builder = python.apply(BucketClustering.withOptions(info, new CaseInsensitiveStringMap(options)));
            Write built = (truncate ? ((SupportsTruncate) builder).truncate() : builder).build();
            return TaskErrors.write(write(built, planFile, options));
        }
    }

    private static final class PublishingWrite implements Write {
        private final Write python;
        private final String planFile;
        private final Map<String, String> options;

        PublishingWrite(Write python, String planFile, Map<String, String> options) {
            this.python = python;
            this.planFile = planFile;
            this.options = options;
        }

        @Override
        public String description() {
            return python.description();
        }

        @Override
        public BatchWrite toBatch() {
            return batch(python.toBatch(), planFile, options);
        }

        @Override
        public StreamingWrite toStreaming() {
            return streaming(python.toStreaming(), planFile, options);
        }

        @Override
        public CustomMetric[] supportedCustomMetrics() {
            return python.supportedCustomMetrics();
        }

        @Override
        public CustomTaskMetric[] reportDriverMetrics() {
            return python.reportDriverMetrics();
        }
    }
}
