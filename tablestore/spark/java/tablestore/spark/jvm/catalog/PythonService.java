package tablestore.spark.jvm.catalog;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.internal.SQLConf;

/**
 * The long-lived Python helper of this JVM ({@code python -m tablestore.spark.catalog_service}), started on the
 * first call and again when it died, speaking JSON lines: request {@code {"id", "action", "args"}}, response
 * {@code {"id", "ok", "result"}} or {@code {"id", "ok": false, "error": {"type", "message"}}}. One request at a
 * time (calls are serialised); every rule lives on the Python side.
 *
 * <p>The interpreter: {@code spark.pyspark.python}, else {@code PYSPARK_PYTHON}, else {@code python3}.
 */
public final class PythonService {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PythonService INSTANCE = new PythonService();
    /** A second process for the commits of writes ({@link ServiceCommit}): a long commit (a Kafka
     * transaction, compaction) does not hold up the catalog's calls of other queries. */
    private static final PythonService COMMITS = new PythonService();

    private volatile Process process;
    private final java.util.concurrent.atomic.AtomicBoolean warming = new java.util.concurrent.atomic.AtomicBoolean();
    private BufferedWriter toPython;
    private BufferedReader fromPython;
    private File stderr;
    private long nextId = 1;

    private PythonService() {
    }

    public static PythonService get() {
        return INSTANCE;
    }

    static PythonService commits() {
        return COMMITS;
    }

    /** Runs {@code action} with {@code args}; its result, or PythonServiceException with Python's message. */
    public static JsonNode call(String action, Map<String, Object> args) {
        return INSTANCE.request(action, args);
    }

    public JsonNode request(String action, Map<String, Object> args) {
        return request(action, args, true);
    }

    /**
     * {@code action} with {@code args}; with {@code retry}, sent again to a fresh process when this one died before
     * answering, which only an action that is safe to run twice may ask for (not a commit: a commit that died
     * after its snapshot and ran again would take its files for a replay's and delete them).
     */
    public synchronized JsonNode request(String action, Map<String, Object> args, boolean retry) {
        Map<String, Object> request = new LinkedHashMap<>();
        long id = nextId++;
        request.put("id", id);
        request.put("action", action);
        request.put("args", args);
        String line;
        try {
            line = JSON.writeValueAsString(request);
        } catch (IOException e) {
            throw new PythonServiceException("ProtocolError", "cannot encode the request of " + action + ": " + e);
        }
        String answer = exchange(line, retry);
        JsonNode response;
        try {
            response = JSON.readTree(answer);
        } catch (IOException e) {
            throw new PythonServiceException("ProtocolError", "the catalog service answered something that is not "
                + "JSON: " + answer);
        }
        if (response.path("ok").asBoolean(false)) {
            return response.get("result");
        }
        JsonNode error = response.path("error");
        throw new PythonServiceException(error.path("type").asText("Error"), error.path("message").asText(answer));
    }

    /**
     * One request; when the process died (or was never healthy), once more to a fresh one, if {@code retry} or the
     * request never reached it (its pipe was closed: a process that died between requests).
     */
    private String exchange(String line, boolean retry) {
        return exchange(line, retry, true);
    }

    private String exchange(String line, boolean retry, boolean again) {
        boolean sent = false;
        try {
            ensureStarted();
            toPython.write(line);
            toPython.write('\n');
            toPython.flush();
            sent = true;
            String answer = fromPython.readLine();
            if (answer == null) {
                throw new IOException("the catalog service exited");
            }
            return answer;
        } catch (IOException e) {
            String tail = stderrTail();
            stop();
            if (again && (retry || !sent)) {
                return exchange(line, retry, false);
            }
            throw new PythonServiceException("CatalogServiceError", "the Python catalog service ("
                + String.join(" ", command()) + ") failed: " + e.getMessage() + (tail.isEmpty() ? "" : "\n" + tail));
        }
    }

    /**
     * Starts the catalog service and the commit service now, in the background, unless they run (a session's
     * warm-up: tablestore/spark/warm_up.py).
     */
    public static void warmUp() {
        INSTANCE.warm("ping");
        COMMITS.warm(ServiceCommit.PREPARE);
    }

    /** Starts the process now, in the background, unless it runs: its first request does not wait for Python to
     * start and import what it needs ({@code action}, safe to run twice). */
    void warm(String action) {
        Process running = process;   // never waits for a request in flight (the warming one, a commit)
        if (running != null && running.isAlive() || !warming.compareAndSet(false, true)) {
            return;
        }
        Thread thread = new Thread(() -> {
            try {
                request(action, Map.of(), true);
            } catch (RuntimeException e) {   // the first real request starts it again and reports why
                org.slf4j.LoggerFactory.getLogger(PythonService.class).debug("warming {} failed", action, e);
            } finally {
                warming.set(false);
            }
        }, "tablestore-python-service-warm");
        thread.setDaemon(true);
        thread.start();
    }

    private void ensureStarted() throws IOException {
        if (process != null && process.isAlive()) {
            return;
        }
        stop();
        stderr = File.createTempFile("tablestore-catalog-service-", ".log");
        stderr.deleteOnExit();
        ProcessBuilder builder = new ProcessBuilder(command());
        builder.redirectError(ProcessBuilder.Redirect.to(stderr));
        process = builder.start();
        toPython = new BufferedWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8));
        fromPython = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    }

    private static List<String> command() {
        String python = null;
        try {
            python = SQLConf.get().getConfString("spark.pyspark.python", null);
        } catch (RuntimeException ignored) {
            // no session: the environment decides
        }
        if (python == null || python.isEmpty()) {
            python = System.getenv("PYSPARK_PYTHON");
        }
        if (python == null || python.isEmpty()) {
            python = "python3";
        }
        return List.of(python, "-m", "tablestore.spark.catalog_service");
    }

    private String stderrTail() {
        if (stderr == null || !stderr.exists()) {
            return "";
        }
        try {
            List<String> lines = Files.readAllLines(stderr.toPath(), StandardCharsets.UTF_8);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
        } catch (IOException e) {
            return "";
        }
    }

    private void stop() {
        if (process != null) {
            process.destroy();
        }
        process = null;
        toPython = null;
        fromPython = null;
    }

    /** A JSON object node, for callers that build nested args. */
    public static ObjectNode object() {
        return JSON.createObjectNode();
    }

    public static ObjectMapper mapper() {
        return JSON;
    }
}
