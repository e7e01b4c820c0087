"""tablestore's Spark integration. Importing it never starts Spark; pyspark is imported when a function runs.

- `upsert_materialize(df, primary_key=[...], ...)`: the upsert materializer as a stateful operator in the job.
- `local_session()`: a local SparkSession configured for it (RocksDB state store).
"""
from tablestore.spark.materialize import upsert_materialize
from tablestore.spark.session import local_session

__all__ = ["local_session", "upsert_materialize"]
