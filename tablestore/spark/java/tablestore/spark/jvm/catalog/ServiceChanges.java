package tablestore.spark.jvm.catalog;

import java.io.File;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.util.ByteArrayReadableSeekableByteChannel;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import tablestore.spark.jvm.HadoopFiles;

/**
 * A streaming read of a table without a log whose micro-batches the catalog service computes on the driver
 * (tablestore/spark/stream_read.py, {@code changes_in_service}: the same changes the Python reader's tasks compute)
 * and hands over as Arrow IPC bytes carried by the batch's one input partition, read here by Arrow's Java reader:
 * no Python worker runs for the batch. PySpark's Python stream reader costs 0.1-0.2 s per micro-batch before and
 * after its {@code read} (a trivial Python source: 0.26-0.31 s from a new offset to a collected batch), which is
 * most of a small commit's latency. Everything else (offsets, admission control, AvailableNow) stays the Python
 * stream's; a batch the service declines (a log, a base snapshot to scan, more than its record limit) or any error
 * goes to the Python stream's partitions and reader, as before.
 */
final class ServiceChanges {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(ServiceChanges.class);

    /** The stream's metrics (a query's progress, {@code sources[].metrics}): the micro-batches the catalog service
     * computed, and those Python's reader read. */
    static final String SERVICE_BATCHES = "batchesComputedByService";
    static final String PYTHON_BATCHES = "batchesReadByPython";
    /** The most bytes of Arrow a batch's task carries (Spark sends a task in one RPC message, 128 MiB at most by
     * default); a larger batch is left to Python's reader. */
    static final long MAX_BYTES = 16L << 20;

    private ServiceChanges() {
    }

    /** {@code python}, with its snapshot micro-batches computed by the service for {@code options}' table. */
    static MicroBatchStream wrap(MicroBatchStream python, Map<String, String> options, StructType schema) {
        Map<String, String> readOptions = new HashMap<>(options);
        HadoopFiles.markS3a(readOptions);
        Set<Class<?>> interfaces = new LinkedHashSet<>();
        for (Class<?> c = python.getClass(); c != null; c = c.getSuperclass()) {
            collect(c, interfaces);
        }
        interfaces.add(ReportsSourceMetrics.class);
        Object[] last = new Object[2];   // the last batch planned here: its offsets, its partitions
        long[] batches = new long[2];    // batches planned by the service, by Python
        InvocationHandler handler = (proxy, method, args) -> {
            try {
                if (method.getName().equals("planInputPartitions") && method.getParameterCount() == 2) {
                    // Spark plans a batch again for each query of its DataFrame (foreachBatch): computed once
                    String batch = ((Offset) args[0]).json() + " " + ((Offset) args[1]).json();
                    synchronized (last) {
                        if (!batch.equals(last[0])) {
                            last[0] = batch;
                            last[1] = plan((Offset) args[0], (Offset) args[1], readOptions, schema);
                            batches[last[1] != null ? 0 : 1]++;
                        }
                        if (last[1] != null) {
                            return ((InputPartition[]) last[1]).clone();
                        }
                    }
                    return method.invoke(python, args);
                }
                if (method.getName().equals("metrics") && method.getDeclaringClass() == ReportsSourceMetrics.class) {
                    synchronized (last) {   // the query's progress: sources[].metrics
                        return Map.of(SERVICE_BATCHES, Long.toString(batches[0]),
                            PYTHON_BATCHES, Long.toString(batches[1]));
                    }
                }
                if (method.getName().equals("createReaderFactory") && method.getParameterCount() == 0) {
                    return new Factory((PartitionReaderFactory) method.invoke(python));
                }
                if (method.getName().equals("toString") && method.getParameterCount() == 0) {
                    return python.toString();
                }
                return method.invoke(python, args);
            } catch (InvocationTargetException e) {
                throw thrown(method, e.getCause());
            }
        };
        return (MicroBatchStream) Proxy.newProxyInstance(ServiceChanges.class.getClassLoader(),
            interfaces.toArray(new Class<?>[0]), handler);
    }

    /**
     * What a proxy of a stream throws for {@code error}, thrown by the stream's {@code method}: the error itself when
     * the method may throw it; else a checked exception of the Scala stream (an interrupted read when the query
     * stops) inside an UncheckedIOException, which Spark looks into to tell a stop from a failure (a proxy would
     * wrap it in an UndeclaredThrowableException, and the stopped query would report it as its error).
     */
    static Throwable thrown(Method method, Throwable error) {
        if (error instanceof RuntimeException || error instanceof Error) {
            return error;
        }
        for (Class<?> declared : method.getExceptionTypes()) {
            if (declared.isInstance(error)) {
                return error;
            }
        }
        if (error instanceof IOException) {
            return new UncheckedIOException((IOException) error);
        }
        if (error instanceof InterruptedException) {
            Thread.currentThread().interrupt();
            IOException interrupted = new InterruptedIOException(error.getMessage());
            interrupted.initCause(error);
            return new UncheckedIOException(interrupted);
        }
        return new IllegalStateException(error);
    }

    static void collect(Class<?> c, Set<Class<?>> out) {
        for (Class<?> i : c.getInterfaces()) {
            if (java.lang.reflect.Modifier.isPublic(i.getModifiers()) && out.add(i)) {
                collect(i, out);
            }
        }
    }

    /** The batch's partitions when the service computes it (none for a batch without changes); null otherwise. */
    private static InputPartition[] plan(Offset start, Offset end, Map<String, String> options, StructType schema) {
        File file = null;
        try {
            JsonNode from = JSON.readTree(start.json());
            JsonNode to = JSON.readTree(end.json());
            if (!from.path("base").isNull() && !from.path("base").isMissingNode() || !from.has("snapshot")
                    || !to.has("snapshot")) {
                return null;   // a base snapshot to scan first, or a log: Python's reader
            }
            file = File.createTempFile("tablestore-changes-", ".arrow");
            Map<String, Object> args = new HashMap<>();
            args.put("options", options);
            args.put("start", from.get("snapshot").asLong());
            args.put("end", to.get("snapshot").asLong());
            args.put("schema", schema.json());
            args.put("path", file.getAbsolutePath());
            JsonNode answer = PythonService.call("stream_changes", args);
            if (answer == null || !answer.isObject()) {
                return null;
            }
            if (answer.path("rows").asLong() == 0) {
                return new InputPartition[0];
            }
            if (file.length() > MAX_BYTES) {
                LOG.info("a micro-batch of {} bytes of changes is read by Python's reader", file.length());
                return null;   // carried by its task, it would make a task too large to send
            }
            return new InputPartition[] {new Changes(Files.readAllBytes(file.toPath()))};
        } catch (IOException | RuntimeException e) {
            LOG.debug("the catalog service did not compute the micro-batch; the Python reader reads it", e);
            return null;
        } finally {
            if (file != null && !file.delete()) {
                file.deleteOnExit();
            }
        }
    }

    /** One micro-batch's changes, as the service wrote them: an Arrow IPC file's bytes. */
    static final class Changes implements InputPartition {
        private static final long serialVersionUID = 1L;
        final byte[] arrow;

        Changes(byte[] arrow) {
            this.arrow = arrow;
        }
    }

    /** The service's partitions read here; any other (Python's) by Python's factory. */
    static final class Factory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final PartitionReaderFactory python;

        Factory(PartitionReaderFactory python) {
            this.python = python;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            return partition instanceof Changes ? new Reader(((Changes) partition).arrow)
                : python.createReader(partition);
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return python.createColumnarReader(partition);
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return !(partition instanceof Changes) && python.supportColumnarReads(partition);
        }
    }

    /** The rows of an Arrow IPC file's batches, through Spark's Arrow column vectors. */
    static final class Reader implements PartitionReader<InternalRow> {
        private final BufferAllocator allocator = new RootAllocator();
        private final ArrowFileReader file;
        private final List<ColumnVector> columns = new ArrayList<>();
        private Iterator<InternalRow> rows;
        private InternalRow current;

        Reader(byte[] arrow) {
            file = new ArrowFileReader(new ByteArrayReadableSeekableByteChannel(arrow), allocator);
        }

        @Override
        public boolean next() throws IOException {
            while (rows == null || !rows.hasNext()) {
                if (!file.loadNextBatch()) {
                    return false;
                }
                VectorSchemaRoot root = file.getVectorSchemaRoot();
                if (columns.isEmpty()) {
                    for (FieldVector v : root.getFieldVectors()) {
                        columns.add(new ArrowColumnVector(v));
                    }
                }
                ColumnarBatch batch = new ColumnarBatch(columns.toArray(new ColumnVector[0]), root.getRowCount());
                rows = batch.rowIterator();
            }
            current = rows.next();
            return true;
        }

        @Override
        public InternalRow get() {
            return current;
        }

        @Override
        public void close() throws IOException {
            try {
                file.close();
            } finally {
                allocator.close();
            }
        }
    }
}
