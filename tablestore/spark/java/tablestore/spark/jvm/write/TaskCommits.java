package tablestore.spark.jvm.write;

import java.io.ByteArrayOutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.execution.datasources.v2.python.PythonWriterCommitMessage;

/**
 * What a JVM write task hands the driver's Python commit (tablestore/spark/jvm_write.py {@code JvmTaskCommit},
 * handover/jvm-task-commit.schema.json): JSON {@code {task, bucket, rows, files}} from a task that wrote one
 * bucket, {@code {task, runs: [{task, bucket, rows, files}, ...]}} from one that wrote into several
 * ({@link BucketFanOut}), pickled so that Python's batch write receives it as the task's WriterCommitMessage.
 */
final class TaskCommits {
    private TaskCommits() {
    }

    /** The commit message of task {@code task}, whose writers wrote {@code writers}' buckets. */
    static WriterCommitMessage of(int task, List<BucketRunWriter> writers) {
        List<Map<String, Object>> runs = new ArrayList<>();
        for (BucketRunWriter w : writers) {
            Map<String, Object> run = new LinkedHashMap<>();
            run.put("task", task);
            run.put("bucket", w.bucket());
            run.put("rows", w.rows());
            run.put("files", w.files());
            runs.add(run);
        }
        Object message;
        if (runs.size() == 1) {
            message = runs.get(0);
        } else {
            Map<String, Object> all = new LinkedHashMap<>();
            all.put("task", task);
            all.put("runs", runs);
            message = all;
        }
        try {
            return new PythonWriterCommitMessage(pickle(new ObjectMapper().writeValueAsString(message)));
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * A pickle of {@code tablestore.spark.jvm_write.JvmTaskCommit(json)} (pickle protocol 2: GLOBAL, BINUNICODE,
     * TUPLE1, REDUCE, STOP).
     */
    static byte[] pickle(String json) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(0x80);
        out.write(2);
        out.write('c');
        out.writeBytes("tablestore.spark.jvm_write\nJvmTaskCommit\n".getBytes(StandardCharsets.US_ASCII));
        byte[] text = json.getBytes(StandardCharsets.UTF_8);
        out.write('X');
        for (int i = 0; i < 4; i++) {
            out.write((text.length >>> (8 * i)) & 0xff);
        }
        out.writeBytes(text);
        out.write(0x85);
        out.write('R');
        out.write('.');
        return out.toByteArray();
    }
}
