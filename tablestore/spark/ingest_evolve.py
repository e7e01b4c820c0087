"""What an ingest job does when the decoder ends a micro-batch (tablestore/spark/cdc_decode.py): its error read out of
Spark's exception text, and the schema change a record asks for applied to the table. Shared by `tablestore ingest`
(tablestore/spark/ingest.py) and `tablestore ingest-database` (tablestore/spark/database_sync.py).

A decoder error marked SCHEMA_CHANGE (a record with columns the table lacks, a wider declared type, a number too
large for its column) ends the micro-batch before it commits: `evolve` reads that record from Kafka, works out the
change (tablestore.cdc.evolution) and, if `ingest.schema-evolution` is `add-columns`, alters the table (new nullable
columns at the end, widened types); with `fail`, or a change no table can follow, it raises IngestError naming the
column and both types.
"""
from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa

import catalog
import logstore
from catalog import INGEST_SCHEMA_EVOLUTION
from filestore import widens
from tablestore.cdc import CdcSchemaError, evolution, record_schema
from tablestore.cdc.schemas import Evolution
from tablestore.errors import TableStoreError
from tablestore.spark.cdc_decode import BAD_RECORD, SCHEMA_CHANGE, TRUNCATE
from tablestore.spark.source_options import TableRef

if TYPE_CHECKING:
    from catalog import CatalogTable

log = logging.getLogger(__name__)


class IngestError(TableStoreError):
    """The ingest job stopped on bad input or a schema change the table cannot follow; nothing of the micro-batch
    it stopped at was committed, and a restart resumes there."""


_WHERE = re.compile(r"in topic (?P<topic>\S+) partition (?P<partition>\d+) offset (?P<offset>\d+): (?P<detail>[^\n]*)")
_DECODER_MESSAGE = re.compile(
    rf"(?P<marker>{BAD_RECORD}|{SCHEMA_CHANGE}|{TRUNCATE}): "
    r"(?P<message>table [^\n(]*? in topic \S+ partition \d+ offset \d+: [^\n]*)")
_COLUMN = re.compile(r"column (?P<column>\S+): cannot read")
_PYTHON_ERROR = re.compile(r"^((?:\w+\.)*\w*(?:Error|Exception): .+)$", re.MULTILINE)


def decoder_error(failure: str) -> tuple[str | None, str]:
    """The decoder's marker (BAD_RECORD, SCHEMA_CHANGE, TRUNCATE or None) and its message line out of Spark's
    exception text. The text also holds the query's plan, whose decoder expressions hold the markers (before the
    message on PySpark 4.1, after it on 4.2+): the message is the marker followed by a record's topic, partition and
    offset."""
    found = _DECODER_MESSAGE.search(failure)
    if found is None:
        first = failure.strip().split("\n")[0]
        head, traceback, rest = first.partition("Traceback (most recent call last)")
        raised = _PYTHON_ERROR.findall(failure) if traceback else []   # a Python error: its exception line
        return None, head + raised[-1] if raised else first
    line = re.sub(r"\s*SQLSTATE: \w+", "", found.group("message"))
    return found.group("marker"), line.rstrip(" .'\"")


def stop_message(failure: str) -> str:
    """The one line a stopped job reports: a bad record's opened by BAD_RECORD (the name docs/cdc.md gives it, to
    grep logs for), anything else as it is."""
    marker, line = decoder_error(failure)
    return f"{BAD_RECORD}: {line}" if marker == BAD_RECORD else line


def message(failure: str) -> str:
    """The decoder's own message out of Spark's exception text (marker dropped), else Spark's first line."""
    return decoder_error(failure)[1]


def evolve(ref: TableRef, handle: "CatalogTable", failure: str, format: str, properties: Mapping[str, str],
           samples: list[logstore.KafkaRecord]) -> tuple["CatalogTable", str]:
    """The table altered to take the record a SCHEMA_CHANGE `failure` names (appended to `samples`: the decoder's
    fast path for the new schema), and what changed; IngestError when it cannot or must not change."""
    where = _WHERE.search(message(failure))
    if where is None:
        raise IngestError(message(failure))
    detail = where.group("detail")
    record = logstore.record_at(dict(properties), where.group("topic"), int(where.group("partition")),
                                int(where.group("offset")))
    samples.append(record)
    schema = handle.schema.arrow_schema
    try:
        found = record_schema(format, record.key, record.value)
        change = evolution(handle.identifier, schema, found, tuple(handle.schema.primary_keys))
        column = _COLUMN.search(detail)
        if not change and column is not None:
            change = _widen_overflow(handle, found, column.group("column"), detail)
    except CdcSchemaError as e:
        raise IngestError(f"{e} (at topic {record.topic} partition {record.partition} offset {record.offset})") \
            from None
    if not change:
        raise IngestError(f"table {handle.identifier!r}: the record at topic {record.topic} partition "
                          f"{record.partition} offset {record.offset} was taken for a schema change ({detail}), "
                          f"but the table already takes its columns")
    if handle.options.get(INGEST_SCHEMA_EVOLUTION) == "fail":
        raise IngestError(f"table {handle.identifier!r}: the source's schema changed at topic {record.topic} "
                          f"partition {record.partition} offset {record.offset} ({change.describe()}) and "
                          f"{INGEST_SCHEMA_EVOLUTION.key} is 'fail'")
    cat = catalog.Catalog(ref.warehouse, dict(ref.catalog_options))
    try:
        altered = cat.alter_table(handle.identifier, add_columns=list(change.add_columns),
                                  alter_column_types=dict(change.widen))
    except catalog.CatalogError as e:
        raise IngestError(str(e)) from None
    log.info("ingest %s: %s at topic %s partition %s offset %s", handle.identifier, change.describe(),
             record.topic, record.partition, record.offset)
    return altered, change.describe()


def _widen_overflow(handle: "CatalogTable", found: Any, column: str, detail: str) -> Evolution:
    """A number too large for its column (the record declares no types): widen to the type the record's value
    suggests (int64 for an integer, double for a float column, decimal(38, s) for a decimal)."""
    schema: pa.Schema = handle.schema.arrow_schema
    if column not in schema.names:
        return Evolution()
    old = schema.field(column).type
    new = pa.decimal128(38, old.scale) if pa.types.is_decimal(old) else (
        pa.float64() if pa.types.is_floating(old) else pa.int64())
    if column in handle.schema.primary_keys or not widens(old, new):
        raise CdcSchemaError(f"table {handle.identifier!r}: {detail}; column {column!r} of type {old} cannot widen "
                             f"to {new}" + (" (a primary-key column's type cannot change)"
                                            if column in handle.schema.primary_keys else ""))
    return Evolution(widen=((column, new),))
