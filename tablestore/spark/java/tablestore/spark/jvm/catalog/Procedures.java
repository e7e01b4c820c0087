package tablestore.spark.jvm.catalog;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.procedures.BoundProcedure;
import org.apache.spark.sql.connector.catalog.procedures.ProcedureParameter;
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The procedures of the managed catalog ({@code CALL managed.system.<name>(...)}, or Paimon's {@code sys.<name>}),
 * each one action of the Python
 * helper ({@code tablestore.spark.sql_actions}) whose result rows come back as the one LocalScan Spark accepts:
 * <pre>
 *   compact(table, partitions => 'k=v[,k=v...][;...]', full => true,    synchronous compaction, files before/after
 *           where => 'dt &gt;= ...')                                     (on the executors: {@link CompactJob})
 *   expire_snapshots(table, retain_last => n)                           how many snapshots expired
 *   expire_partitions(table, expiration_time => '1 d',                  the partitions dropped
 *           timestamp_formatter => ..., timestamp_pattern => ...)
 *   describe_detail(table, partition => 'k=v[,...]')                    DESCRIBE DETAIL (the parser's rewrite)
 *   create_tag(table, tag => 'x', snapshot => n)                        the new tag, as its $tags row
 *   delete_tag(table, tag => 'x')                                       the deleted tag
 *   reset_consumer(table, consumer_id => 'x', snapshot => n)            the consumer's next snapshot (deleted: none)
 * </pre>
 */
public final class Procedures {
    static final String NAMESPACE = "system";
    /** Paimon's procedure namespace ({@code CALL sys.compact(...)}): the same procedures. */
    static final String PAIMON_NAMESPACE = "sys";

    private record Param(String name, DataType type, String defaultValue, String comment) {
    }

    private record Definition(String description, List<Param> params) {
    }

    private static final Map<String, Definition> DEFINITIONS = new LinkedHashMap<>();

    static {
        Param table = new Param("table", DataTypes.StringType, null, "the table, as 'database.table'");
        DEFINITIONS.put("compact", new Definition("compacts a table (or some partitions) now, as `tablestore compact`",
            List.of(table, new Param("partitions", DataTypes.StringType, "NULL",
                    "partition specs 'column=value[,column=value...]', several separated by ';' (default: all)"),
                new Param("full", DataTypes.BooleanType, "true",
                    "merge every sorted run of a bucket into one (false: the universal compaction picker)"),
                new Param("where", DataTypes.StringType, "NULL",
                    "a predicate on partition columns selecting the partitions (Paimon's `where`; OPTIMIZE ... WHERE)"))));
        DEFINITIONS.put("expire_snapshots", new Definition("expires old snapshots and deletes the files only they use",
            List.of(table, new Param("retain_last", DataTypes.IntegerType, "NULL",
                "keep the newest n snapshots (default: the table's snapshot.num-retained/time-retained options)"))));
        DEFINITIONS.put("expire_partitions", new Definition("drops the partitions older than an expiration time, "
                + "read from their values (Paimon's expire_partitions)",
            List.of(table, new Param("expiration_time", DataTypes.StringType, "NULL",
                    "partitions older than this (e.g. '1 d') are dropped (default: the table's expiration option)"),
                new Param("timestamp_formatter", DataTypes.StringType, "NULL",
                    "e.g. 'yyyyMMdd' (default: the partition.timestamp-formatter option)"),
                new Param("timestamp_pattern", DataTypes.StringType, "NULL",
                    "e.g. '$dt $hour:00:00' (default: the partition.timestamp-pattern option)"),
                new Param("expire_strategy", DataTypes.StringType, "NULL",
                    "'values-time', the only strategy (Paimon's update-time is not supported)"))));
        DEFINITIONS.put("describe_detail", new Definition("DESCRIBE DETAIL (FLIP-188) of a table or of partitions",
            List.of(table, new Param("partition", DataTypes.StringType, "NULL",
                "a partition spec 'column=value[,column=value...]' (default: the table)"))));
        Param tag = new Param("tag", DataTypes.StringType, null, "the tag's name");
        DEFINITIONS.put("create_tag", new Definition("tags a snapshot: VERSION AS OF 'tag' reads it, expiry keeps it",
            List.of(table, tag, new Param("snapshot", DataTypes.LongType, "NULL",
                "the snapshot id to tag (default: the latest snapshot)"))));
        DEFINITIONS.put("delete_tag", new Definition("deletes a tag (and the files only its expired snapshot used)",
            List.of(table, tag)));
        DEFINITIONS.put("reset_consumer", new Definition("moves a consumer so it next reads the changes of a snapshot "
                + "on, or deletes it (no snapshot)",
            List.of(table, new Param("consumer_id", DataTypes.StringType, null, "the consumer's id"),
                new Param("snapshot", DataTypes.LongType, "NULL",
                    "the next snapshot whose changes it reads (default: delete the consumer)"))));
    }

    private Procedures() {
    }

    public static UnboundProcedure load(ManagedCatalog catalog, Identifier ident) {
        Definition definition = ours(ident.namespace())
            ? DEFINITIONS.get(ident.name().toLowerCase(java.util.Locale.ROOT)) : null;
        if (definition == null) {
            throw Errors.unchecked(new PythonServiceException("NoSuchProcedure", "procedure " + catalog.name() + "."
                + ident + " does not exist; the managed catalog has " + String.join(", ", qualified(catalog))));
        }
        return new Call(catalog, ident.name().toLowerCase(java.util.Locale.ROOT), definition);
    }

    public static Identifier[] list(String[] namespace) {
        if (!ours(namespace)) {
            return new Identifier[0];
        }
        List<Identifier> out = new ArrayList<>();
        for (String name : DEFINITIONS.keySet()) {
            out.add(Identifier.of(new String[] {namespace[0].toLowerCase(java.util.Locale.ROOT)}, name));
        }
        return out.toArray(new Identifier[0]);
    }

    private static boolean ours(String[] namespace) {
        return namespace.length == 1
            && (namespace[0].equalsIgnoreCase(NAMESPACE) || namespace[0].equalsIgnoreCase(PAIMON_NAMESPACE));
    }

    private static List<String> qualified(ManagedCatalog catalog) {
        List<String> out = new ArrayList<>();
        for (String name : DEFINITIONS.keySet()) {
            out.add(catalog.name() + "." + NAMESPACE + "." + name);
        }
        return out;
    }

    /** One procedure, unbound and bound (its parameters do not depend on the call's input types). */
    private static final class Call implements UnboundProcedure, BoundProcedure {
        private final ManagedCatalog catalog;
        private final String name;
        private final Definition definition;

        Call(ManagedCatalog catalog, String name, Definition definition) {
            this.catalog = catalog;
            this.name = name;
            this.definition = definition;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public String description() {
            return definition.description();
        }

        @Override
        public BoundProcedure bind(StructType inputType) {
            return this;
        }

        @Override
        public ProcedureParameter[] parameters() {
            ProcedureParameter[] out = new ProcedureParameter[definition.params().size()];
            for (int i = 0; i < out.length; i++) {
                Param p = definition.params().get(i);
                ProcedureParameter.Builder b = ProcedureParameter.in(p.name(), p.type()).comment(p.comment());
                if (p.defaultValue() != null) {
                    b = b.defaultValue(p.defaultValue());
                }
                out[i] = b.build();
            }
            return out;
        }

        @Override
        public boolean isDeterministic() {
            return false;
        }

        @Override
        public Iterator<Scan> call(InternalRow input) {
            List<Object> extra = new ArrayList<>();
            for (int i = 0; i < definition.params().size(); i++) {
                Param p = definition.params().get(i);
                extra.add(p.name());
                extra.add(input.isNullAt(i) ? null : valueOf(input, i, p.type()));
            }
            boolean none = false;   // OPTIMIZE ... WHERE that selects no partition: nothing to rewrite
            if (name.equals("compact") && extra.get(7) != null) {
                if (extra.get(3) != null) {
                    throw Errors.unchecked(new PythonServiceException("InvalidArgument", "compact of table '"
                        + extra.get(1) + "': give partitions or where, not both"));
                }
                String selected = OptimizeWhere.partitions(catalog, (String) extra.get(1), (String) extra.get(7));
                extra.set(3, selected);
                none = "".equals(selected);
            }
            if (name.equals("compact") && !none && CompactJob.onExecutors()) {   // the buckets rewritten by Spark tasks
                return Collections.<Scan>singletonList(ResultScan.of(CompactJob.run(catalog, (String) extra.get(1),
                    (String) extra.get(3), (Boolean) extra.get(5)))).iterator();
            }
            return Collections.<Scan>singletonList(
                ResultScan.of(catalog.call(name, catalog.args(extra.toArray())))).iterator();
        }

        private static Object valueOf(InternalRow row, int i, DataType type) {
            if (type == DataTypes.BooleanType) {
                return row.getBoolean(i);
            }
            if (type == DataTypes.IntegerType) {
                return row.getInt(i);
            }
            if (type == DataTypes.LongType) {
                return row.getLong(i);
            }
            return row.getUTF8String(i).toString();
        }
    }
}
