r"""tablestore's Spark integration. Importing it never starts Spark; pyspark is imported when a function runs.

- `session(warehouse=..., master=None, **conf)`: a SparkSession for managed tables (the `managed` data source:
  `spark.read.format("managed").load("db.t")`, `df.write.format("managed").save("db.t")`).
- `distribute_by_bucket(df, "db.t")`: each bucket in one task in strict input order before a `managed` write.
- `materialize_for_sink(df, "db.t")`: a streaming changelog through the upsert materializer when the table's
  `sink.upsert-materialize` says so, before `df.writeStream.format("managed")`.
- `read_changes(spark, "db.t", scan="full")`: a streaming DataFrame of the table's changes (`_row_kind` + columns).
- `read_cdc(spark, topic=..., bootstrap_servers=..., format="debezium-json", table="db.t")`: a database's change
  stream in Kafka (Debezium, canal, Maxwell or upsert JSON) as the table's changelog, decoded in the JVM
  (`session(kafka=True)` puts Spark's Kafka source on the classpath); `tablestore ingest` runs the whole job.
- `ingest_database(spark, "shop", r"shop\.public\..*", bootstrap_servers, warehouse, create=True)`: every table of a
  source database kept in a table of its own by one job (`tablestore ingest-database`).
- `upsert_materialize(df, primary_key=[...], ...)`: the upsert materializer as a stateful operator in the job.
- `local_session()`: a local SparkSession configured for it (RocksDB state store, the tablestore Spark jar).
- `spark_sql_args(warehouse=...)`: `--jars`/`--conf` arguments for a `spark-sql`/`spark-submit` of your own with
  the `managed` SQL catalog (`tablestore sql --warehouse W` opens PySpark's spark-sql with them).
- `jar_path()`: the tablestore Spark jar (built on first use), for `spark.jars` of a session of your own.
"""
from tablestore.spark.cdc import read_cdc
from tablestore.spark.datasource import read_changes
from tablestore.spark.distribute import distribute_by_bucket
from tablestore.spark.database_sync import ingest_database
from tablestore.spark.jar import jar_path
from tablestore.spark.materialize import upsert_materialize
from tablestore.spark.sink import materialize_for_sink
from tablestore.spark.sessions import local_session, session
from tablestore.spark.shell import spark_sql_args

__all__ = ["distribute_by_bucket", "ingest_database", "jar_path", "local_session", "materialize_for_sink", "read_cdc", "read_changes",
           "session",
           "spark_sql_args", "upsert_materialize"]
