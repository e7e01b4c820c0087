package tablestore.spark.jvm.provider;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.SupportsCatalogOptions;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Option;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;
import tablestore.spark.jvm.HadoopFiles;
import tablestore.spark.jvm.PythonSourceBridge;
import tablestore.spark.jvm.TaskErrors;
import tablestore.spark.jvm.catalog.ManagedTable;
import tablestore.spark.jvm.catalog.PythonService;
import tablestore.spark.jvm.read.RawSplits;
import tablestore.spark.jvm.mirror.Contract;

/**
 * The JVM face of the {@code managed} data source: everything is delegated to the Python data source
 * ({@code pyspark_managed.DefaultSource}, registered under the same short name) through a fresh Python source
 * ({@link PythonSourceBridge.Source}) per provider instance (Spark creates one provider per lookup). It exists for
 * one thing Python cannot do: give a streaming read without a schema ({@code spark.readStream.format("managed")
 * .load("db.orders")}) the changelog schema ({@code _row_kind} + the table's columns) while a batch read of the same
 * options gets the table's schema. A Python data source answers {@code schema()} once, without knowing which.
 *
 * <p>How Spark finds it: {@code format("managed")} resolves (DataSource.lookupDataSource, Spark 4.1-4.3) to a
 * {@code DataSourceRegister} named {@code managed} if one is on the classpath, else to the class
 * {@code managed.DefaultSource}, else to the Python source of that name. A {@code DataSourceRegister} would clash with
 * the Python source (Spark's master branch raises FOUND_MULTIPLE_DATA_SOURCES when both exist), so this provider is
 * found by its class name: {@code managed.DefaultSource} extends it. Without the jar, the Python source serves
 * {@code managed} alone (streaming reads then need the schema: {@code tablestore.spark.read_changes}).
 *
 * <p>How it knows a read is a streaming one: for a streaming read Spark (ResolveDataSource / DataStreamReader)
 * first builds the V1 fallback relation of a {@link StreamSourceProvider} (calling {@link #sourceSchema}, only ever
 * called for streaming reads), then, on the same thread, asks the {@link TableProvider} for the table
 * ({@link #inferSchema} when no schema was given). {@code sourceSchema} leaves the options of the streaming read in a
 * thread-local that the next {@code inferSchema} or {@code getTable} on the thread takes (once); {@code inferSchema}
 * then asks the Python source for the changelog schema (option {@value #CHANGES_OPTION}). Spark never uses the V1
 * fallback for this source (its table supports micro-batch reads): {@link #createSource} refuses. A batch read's or
 * a write's schema comes from the catalog service (the Python source's own function, without the Python worker
 * PySpark starts to ask a Python source), the Python source answering when the service cannot.
 *
 * <p>Its tables are the SQL catalog's class ({@link ManagedTable#ofDataSource}): the same scans (the splits that need no
 * merge read by Spark's own Parquet reader), writes, streams and metadata columns.
 *
 * <p>Batch reads and writes go through a catalog ({@link SupportsCatalogOptions}: DataFrameReader.load and
 * DataFrameWriter.save, Spark 4.1-4.3, then load the table from {@link #extractCatalog}'s catalog by
 * {@link #extractIdentifier}'s identifier), because a write relation with a catalog that is a
 * {@code FunctionCatalog} is what lets the write ask Spark for a distribution by the table's bucket function (one
 * writer per bucket, as SQL INSERT). The catalog ({@link ProviderCatalog}) builds the same table as before
 * ({@link #batchTable}: the options travel in the identifier, {@link OptionsIdentifier}), so reads are unchanged;
 * time-travel options stay options of the scan. Streaming reads and writes never ask a provider for a catalog
 * (DataStreamReader/Writer, ResolveDataSource): they are unchanged too. What changes: a batch read cannot take a
 * user-specified schema (Spark refuses one with a catalog; the table's schema is the managed table's anyway).
 */
public class ManagedProvider implements TableProvider, StreamSourceProvider, SupportsCatalogOptions {
    /** The short name of the data source, Python's as well. */
    public static final String SHORT_NAME = PythonSourceBridge.SHORT_NAME;
    /** Injected into the Python source's options: answer {@code schema()} with the changelog schema. */
    public static final String CHANGES_OPTION = Contract.READ_CHANGES_OPTION;

    private static final ThreadLocal<Map<String, String>> STREAMING_READ = new ThreadLocal<>();

    private PythonSourceBridge.Source python;
    /** Where this provider's table has the Python reader write its raw-split plan (see {@link ManagedTable}). */
    private final String planFile = RawSplits.newPlanFile();

    private PythonSourceBridge.Source python() {
        if (python == null) {
            python = new PythonSourceBridge.Source();
        }
        return python;
    }

    private static Map<String, String> lowered(Map<String, String> options) {
        Map<String, String> out = new HashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            out.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        }
        return out;
    }

    private static CaseInsensitiveStringMap withChanges(Map<String, String> options) {
        Map<String, String> out = new HashMap<>(options);
        out.put(CHANGES_OPTION, "true");
        return new CaseInsensitiveStringMap(out);
    }

    /** The options with the raw-plan file: the Python source created here (and cached) serves the later scans. */
    private CaseInsensitiveStringMap withPlan(Map<String, String> options) {
        Map<String, String> out = new HashMap<>(options);
        out.put(RawSplits.RAW_PLAN_OPTION, planFile);
        HadoopFiles.markS3a(out);
        return new CaseInsensitiveStringMap(out);
    }

    /** Whether the options are those of the streaming read announced on this thread (the announcement is taken). */
    private static boolean takeStreamingRead(Map<String, String> options) {
        Map<String, String> pending = STREAMING_READ.get();
        STREAMING_READ.remove();
        return pending != null && pending.equals(lowered(options));
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        try {   // Python's option and table errors, as their line
            if (takeStreamingRead(options.asCaseSensitiveMap())) {
                return python().inferSchema(withChanges(options.asCaseSensitiveMap()));
            }
            CaseInsensitiveStringMap planned = withPlan(options.asCaseSensitiveMap());
            StructType known = serviceSchema(planned);
            return known != null ? known : python().inferSchema(planned);
        } catch (Exception e) {   // AnalysisException is checked in Java's eyes
            throw TaskErrors.driver(e);
        }
    }

    /**
     * The schema of a batch read or a write as the catalog service answers it (the Python source's own function:
     * tablestore/spark/catalog_service.py {@code source_schema}), without the Python worker PySpark starts for a
     * Python data source's schema (about 0.1 s on 4.1); null on any error, which the Python source then raises as
     * its own.
     */
    private static StructType serviceSchema(CaseInsensitiveStringMap options) {
        try {
            JsonNode answer = PythonService.call("source_schema",
                Map.of("options", new HashMap<>(options.asCaseSensitiveMap())));
            return answer != null && answer.isTextual() ? (StructType) DataType.fromJson(answer.asText()) : null;
        } catch (RuntimeException e) {
            return null;
        }
    }

    @Override
    public Transform[] inferPartitioning(CaseInsensitiveStringMap options) {
        return python().inferPartitioning(options);
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        STREAMING_READ.remove();
        return ManagedTable.ofDataSource(python().table(schema, partitioning, properties), planFile, false,
            properties);
    }

    /**
     * The table of a batch read or write, built as Spark builds a provider's table without a catalog
     * (DataSourceV2Utils.getTableFromProvider), whose writes cluster by the table's bucket.
     */
    Table batchTable(CaseInsensitiveStringMap options) {
        StructType schema = inferSchema(options);
        Transform[] partitioning = inferPartitioning(options);
        STREAMING_READ.remove();
        return ManagedTable.ofDataSource(python().table(schema, partitioning, options.asCaseSensitiveMap()), planFile,
            true, options.asCaseSensitiveMap());
    }

    @Override
    public Identifier extractIdentifier(CaseInsensitiveStringMap options) {
        return new OptionsIdentifier(this, options);
    }

    @Override
    public String extractCatalog(CaseInsensitiveStringMap options) {
        return ProviderCatalog.register(options.asCaseSensitiveMap());
    }

    /**
     * The identifier of a batch read or write: the table's name ({@code path} or {@code table} option, split at
     * its dots) and what loads it, this provider with the options ({@link ProviderCatalog#loadTable}).
     */
    static final class OptionsIdentifier implements Identifier {
        private final ManagedProvider provider;
        private final CaseInsensitiveStringMap options;
        private final String[] namespace;
        private final String name;

        OptionsIdentifier(ManagedProvider provider, CaseInsensitiveStringMap options) {
            this.provider = provider;
            this.options = options;
            String table = options.containsKey("path") ? options.get("path") : options.get("table");
            String[] parts = table == null ? new String[] {""} : table.split("\\.", -1);
            this.namespace = Arrays.copyOf(parts, parts.length - 1);
            this.name = parts[parts.length - 1];
        }

        Table load() {
            return provider.batchTable(options);
        }

        @Override
        public String[] namespace() {
            return namespace;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof OptionsIdentifier && Arrays.equals(namespace, ((OptionsIdentifier) o).namespace)
                && name.equals(((OptionsIdentifier) o).name) && options.equals(((OptionsIdentifier) o).options);
        }

        @Override
        public int hashCode() {
            return Objects.hash(Arrays.hashCode(namespace), name);
        }

        @Override
        public String toString() {
            return namespace.length == 0 ? name : String.join(".", namespace) + "." + name;
        }
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    @Override
    public Tuple2<String, StructType> sourceSchema(SQLContext sqlContext, Option<StructType> schema,
                                                  String providerName,
                                                  scala.collection.immutable.Map<String, String> parameters) {
        Map<String, String> options = lowered(CollectionConverters.asJava(parameters));
        STREAMING_READ.set(options);
        if (schema.isDefined()) {
            return new Tuple2<>(SHORT_NAME, schema.get());
        }
        // the V1 relation's schema: the same as the V2 table's (this provider's fresh Python source, as Spark's own)
        try {
            return new Tuple2<>(SHORT_NAME, new PythonSourceBridge.Source().inferSchema(withChanges(options)));
        } catch (Exception e) {   // AnalysisException is checked in Java's eyes
            throw TaskErrors.driver(e);
        }
    }

    @Override
    public Source createSource(SQLContext sqlContext, String metadataPath, Option<StructType> schema,
                               String providerName, scala.collection.immutable.Map<String, String> parameters) {
        throw new UnsupportedOperationException("the managed data source reads streams through the DataSource V2 "
                + "API only: remove it from spark.sql.streaming.disabledV2MicroBatchReaders");
    }
}
