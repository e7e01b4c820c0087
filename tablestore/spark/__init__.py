"""tablestore's Spark integration. Importing it never starts Spark; pyspark is imported when a function runs.

- `upsert_materialize(df, primary_key=[...], ...)`: the upsert materializer as a stateful operator in the job.
- `local_session()`: a local SparkSession configured for it (RocksDB state store, the tablestore Spark jar).
- `jar_path()`: the tablestore Spark jar (built on first use), for `spark.jars` of a session of your own.
"""
from tablestore.spark.jar import jar_path
from tablestore.spark.materialize import upsert_materialize
from tablestore.spark.session import local_session

__all__ = ["jar_path", "local_session", "upsert_materialize"]
