"""Static registration of tablestore's `managed` Spark data source.

PySpark's data-source lookup imports every top-level module named `pyspark_*` in the Python workers' environment
and registers its `DefaultSource` under `DefaultSource.name()`: no `spark.dataSource.register` call is needed.
Every session imports this module, so it imports nothing heavy; the work happens in `tablestore.spark.datasource`.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource


class DefaultSource(DataSource):
    """`managed`: tables of a tablestore warehouse (see tablestore/spark/datasource.py for the options)."""

    @classmethod
    def name(cls) -> str:
        return "managed"

    def schema(self) -> Any:
        from tablestore.spark.datasource import schema_of

        return schema_of(self.options)

    def reader(self, schema: Any) -> Any:
        from tablestore.spark.datasource import reader

        return reader(self.options, schema)

    def writer(self, schema: Any, overwrite: bool) -> Any:
        from tablestore.spark.datasource import writer

        return writer(self.options, schema, overwrite)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        from tablestore.spark.datasource import stream_writer

        return stream_writer(self.options, schema, overwrite)

    def streamReader(self, schema: Any) -> Any:
        from tablestore.spark.datasource import stream_reader

        return stream_reader(self.options, schema)
