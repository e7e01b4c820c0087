"""Change records from Kafka decoded in the JVM: `debezium-json`, `upsert-json`, `canal-json`, `maxwell-json` into
`_row_kind` (+I/-U/+U/-D) and a table's columns, with Spark SQL expressions only (`from_json`, higher-order
functions, `try_cast`): no Python function sees a record, so decoding keeps up with Spark's Kafka source.

The plan, per Kafka record (columns `key`, `value`, `topic`, `partition`, `offset`, `timestamp`):
1. the value (and key) parsed once with `from_json` into the format's envelope, each row image a
   `map<string,string>` of raw JSON texts (numbers and strings as written, objects as JSON);
2. the record's row kinds and images by its format's plan (tablestore/spark/cdc_formats.py: Flink's semantics);
   a tombstone gives none, a record that is not a change of its format gives one row carrying its error;
3. the kinds exploded, then each column read from its text by the table's type (`_convert`): Debezium's
   encodings included when the record declares them (the Connect wrapper's `schema`: decimals as base64 bytes with
   their scale, `io.debezium.time.*` dates and epoch timestamps in ms/µs/ns, zoned timestamps as ISO text);
4. errors: a value its column cannot hold, a null primary key, a malformed record: the record's reason.
   A record whose columns the table does not have, or whose declared type the table does not take, or a number too
   large for its column, is a schema change (`SCHEMA_CHANGE` in the reason): the job stops there, and
   `tablestore ingest` evolves the table and resumes (tablestore/spark/ingest.py).
`changes()` then applies the bad-record policy: `fail` raises (`raise_error`: the micro-batch fails, nothing of it
is committed) naming topic, partition, offset and reason; `skip` drops the row images with an error and counts each
bad record once, by its first row image (observed metrics; `rows` counts only the changes passed on). A record
whose first image reads but a later one does not (one bad row of a canal batch, an unreadable value in an update's
after image only) loses that image alone and is not counted: the images of a record are rows of their own here,
and nothing joins them again without a shuffle.
With `DecodeSpec.source_table`, a record naming another source table gives no rows at all (no error: never a bad
record, never a schema change).

Without the wrapper a numeric timestamp's unit is unknown: below 10^14 it is read as epoch ms, below 10^17 as µs,
else as ns (exact for every instant after 1973). A decimal sent as a JSON number (Maxwell, upsert-json, Debezium's
`decimal.handling.mode=double`) is read through a double; Debezium's default `precise` and `string` modes and canal
(text) are exact.
"""
from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from logstore import ROW_KIND_COLUMN
from tablestore.cdc.schemas import DECIMAL, FORMATS, TIME_UNITS, TIMESTAMP_UNITS, VARIABLE_SCALE_DECIMAL
from tablestore.spark.cdc_formats import (NO_DECLARED, NO_KINDS, PLANS, ROWMAP, SCHEMA_CHANGE, TRUNCATE, BadRecords,  # noqa: F401
                                          DecodeSpec, ident, lit, other_table)
from tablestore.spark.types import spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

BAD_RECORD = "TABLESTORE_CDC_BAD_RECORD"
"""Opens a bad record's error message (`SCHEMA_CHANGE`, from cdc_formats, a schema change's)."""
NOT_JSON = "not valid JSON (a record cut short or not JSON at all)"
"""The reason given for a record whose value does not parse as JSON, whatever its format."""
TS, ERROR, TOPIC, PARTITION, OFFSET = "__cdc_ts_ms", "__cdc_error", "__cdc_topic", "__cdc_partition", "__cdc_offset"
FIRST = "__cdc_first"
"""True on the first row image of its record (a record's first data row, first kind): a record counts once."""
META_COLUMNS = (TS, ERROR, TOPIC, PARTITION, OFFSET, FIRST)
OBSERVATION = "tablestore_cdc"
"""Observed metrics of a decoded stream: rows (the changes it passes on: row images without an error), bad (the bad
records skipped, each once, by its first row image), max_ts_ms and min_ts_ms (the newest and oldest event's
time)."""
CDC_FUNCTIONS = "tablestore.spark.jvm.cdc.CdcFunctions"


_NUMBER = r"'^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$'"
_INTEGER = r"'^[+-]?[0-9]+$'"


def _micros(t: str, unit: str) -> str:
    n = f"try_cast({t} AS BIGINT)"
    return (f"CASE WHEN {unit} = 'ms' OR ({unit} IS NULL AND abs({n}) < 100000000000000) THEN {n} * 1000 "
            f"WHEN {unit} = 'us' OR ({unit} IS NULL AND abs({n}) < 100000000000000000) THEN {n} ELSE {n} DIV 1000 END")


def _convert(t: str, field: pa.Field, declared: str) -> str:
    """SQL reading the text `t` as `field`'s Spark type (null when it cannot: the caller reports it). `declared`:
    SQL of the record's declared logical type name of the column (null without the wrapper) and its scale: where
    it says the encoding (Connect's Decimal, an epoch timestamp's unit), no value is looked at to guess it."""
    st = spark_type(field.type, field.name)
    ddl = st.simpleString()
    variable = (f"IF({t} IS NULL, NULL, reflect('{CDC_FUNCTIONS}', 'decimalFromBase64', "   # reflect: 'null'
                f"get_json_object({t}, '$.value'), coalesce(try_cast(get_json_object({t}, '$.scale') AS INT), 0)))")
    if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
        return f"IF({declared}.name = {lit(VARIABLE_SCALE_DECIMAL)}, {variable}, {t})"
    if pa.types.is_decimal(field.type):
        scale = f"coalesce(try_cast({declared}.scale AS INT), {field.type.scale})"
        from_bytes = f"try_cast(reflect('{CDC_FUNCTIONS}', 'decimalFromBase64', {t}, {scale}) AS {ddl})"
        return (f"CASE WHEN {declared}.name = {lit(DECIMAL)} THEN {from_bytes} "
                f"WHEN {declared}.name = {lit(VARIABLE_SCALE_DECIMAL)} THEN try_cast({variable} AS {ddl}) "
                f"WHEN {t} RLIKE {_NUMBER} THEN try_cast({t} AS {ddl}) ELSE {from_bytes} END")
    if pa.types.is_int64(field.type):   # a time of day in µs, whatever unit Debezium declares (TIME_UNITS)
        units = ", ".join(f"{lit(name)}, {lit(unit)}" for name, unit in TIME_UNITS.items())
        n = f"try_cast({t} AS BIGINT)"
        return (f"CASE map({units})[{declared}.name] WHEN 'ms' THEN {n} * 1000 WHEN 'ns' THEN {n} DIV 1000 "
                f"ELSE {n} END")
    if pa.types.is_date(field.type):
        return (f"CASE WHEN {t} RLIKE {_INTEGER} THEN date_add(DATE'1970-01-01', try_cast({t} AS INT)) "
                f"ELSE try_cast({t} AS DATE) END")
    if pa.types.is_timestamp(field.type):
        units = ", ".join(f"{lit(name)}, {lit(unit)}" for name, unit in TIMESTAMP_UNITS.items())
        unit = f"map({units})[{declared}.name]"
        micros = _micros(t, unit)
        numeric = (f"timestamp_micros({micros})" if field.type.tz is not None else
                   f"timestampadd(MICROSECOND, {micros}, TIMESTAMP_NTZ'1970-01-01 00:00:00')")
        return (f"CASE WHEN {unit} IS NOT NULL OR {t} RLIKE {_INTEGER} THEN {numeric} "
                f"ELSE try_cast({t} AS {ddl}) END")
    if pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type):
        return f"try_to_binary({t}, 'base64')"
    if pa.types.is_list(field.type) or pa.types.is_struct(field.type) or pa.types.is_map(field.type):
        return f"from_json({t}, {lit(ddl)})"
    return f"try_cast({t} AS {ddl})"


def _overflows(t: str, field: pa.Field) -> str | None:
    """SQL: the text is a number its numeric column is too narrow for (the source's column widened)."""
    if pa.types.is_integer(field.type):
        return f"{t} RLIKE {_INTEGER}"
    if pa.types.is_decimal(field.type) or pa.types.is_floating(field.type):
        return f"{t} RLIKE {_NUMBER}"
    return None


class _Query:
    """A chain of projections as one SQL text, each wrapping the one before as a subquery: the decoder's DataFrame
    is one `spark.sql` call (a few JVM calls) rather than a JVM call per expression (measured: 1,674 calls, 0.5 s of
    the driver's time per decoder with PySpark 4.2; 15 ms as one text)."""

    def __init__(self, source: str, columns: list[str]) -> None:
        self.text = source
        self.columns = list(columns)
        self._depth = 0

    def select(self, *items: str | tuple[str, str]) -> None:
        """`items`: a column name, "*" (every column so far), or (SQL, alias)."""
        parts, names = [], []
        for item in items:
            if item == "*":
                parts += [ident(c) for c in self.columns]
                names += self.columns
            elif isinstance(item, tuple):
                parts.append(f"{item[0]} AS {ident(item[1])}" if not item[1].startswith("(") else f"{item[0]} AS {item[1]}")
                names += [n.strip(" `") for n in item[1].strip("()").split(",")]
            else:
                parts.append(ident(item))
                names.append(item)
        self._depth += 1
        self.text = f"SELECT {', '.join(parts)} FROM ({self.text}) AS q{self._depth}"
        self.columns = names


def decode_sql(spec: DecodeSpec, source: str) -> str:
    """The decoder as SQL over the Kafka rows of `source` (a view's name): `_row_kind`, the table's columns, and
    `META_COLUMNS` (event time, the error of a bad record or schema change, the record's topic, partition and offset,
    whether it is the record's first image). No policy applied: see `changes`. Each step is one projection, so what
    later steps use several times is computed once."""
    if spec.format not in PLANS:
        raise ValueError(f"unknown CDC format {spec.format!r}: use one of {', '.join(FORMATS)}")
    plan = PLANS[spec.format](spec)
    keep = [*(["key"] if plan.needs_key else []), "timestamp"]
    q = _Query(f"SELECT {', '.join(keep)}, topic AS {TOPIC}, partition AS {PARTITION}, offset AS {OFFSET}, "
               f"value IS NULL AS tomb, value FROM {source}", [*keep, TOPIC, PARTITION, OFFSET, "tomb", "value"])
    parse = plan.parse or (((("e", f"from_json(CAST(value AS STRING), {lit(plan.envelope)})"),),))
    for step in parse:
        q.select("*", *[(once(sql), name) for name, sql in step])
    for step in plan.pre:
        q.select("*", *[(sql, name) for name, sql in step])
    declared = plan.declared if any(_needs_declared(f.type) for f in spec.schema) else NO_DECLARED
    q.select("*", (other_table(spec, plan), "other"))   # another source table's: no rows
    q.select("*", (f"IF(other, NULL, {plan.error})", "rerr"))
    # why a record fails is looked at only for a bad one: a value that does not parse at all (cut short) says so
    q.select(*[c for c in q.columns if c not in ("value", "rerr")],
             (f"IF(rerr IS NOT NULL AND NOT tomb AND get_json_object(CAST(value AS STRING), '$') IS NULL, "
              f"{lit(NOT_JSON)}, rerr)", "rerr"))
    items = [(f"IF(rerr IS NOT NULL, array(CAST(NULL AS {ROWMAP})), IF(other, array(), {plan.items}))", "items")] \
        if plan.items is not None else []
    q.select(TOPIC, PARTITION, OFFSET, "rerr", (declared, "decl"), (f"CAST({plan.ts} AS BIGINT)", TS),
             (f"IF(rerr IS NOT NULL, array(CAST(NULL AS STRING)), IF(other, {NO_KINDS}, {plan.kinds}))", "kinds"),
             *[(sql, name) for name, sql in plan.carry], *items)
    head = [TOPIC, PARTITION, OFFSET, "rerr", "decl", TS, *[name for name, _ in plan.carry]]
    first = "j = 0"
    if plan.items is not None:
        q.select(*head, "kinds", ("posexplode(items)", "(i, d)"))
        head += ["i", "d"]
        first = "i = 0 AND j = 0"
    q.select(*head, ("posexplode(kinds)", "(j, k)"))
    q.select("k", "rerr", "decl", TS, TOPIC, PARTITION, OFFSET, (first, FIRST), (plan.row, "img"),
             (plan.over or f"CAST(NULL AS {ROWMAP})", "ovr"), (plan.struct_row or "CAST(NULL AS STRING)", "srow"))

    def text(f: pa.Field) -> str:
        from_map = (f"IF(ovr IS NOT NULL AND map_contains_key(ovr, {lit(f.name)}), ovr[{lit(f.name)}], "
                    f"img[{lit(f.name)}])")
        return f"IF(srow IS NOT NULL, srow.{ident(f.name)}, {from_map})" if plan.struct_row else from_map

    q.select("k", "rerr", "decl", TS, TOPIC, PARTITION, OFFSET, FIRST,
             *[(text(f), f"t{i}") for i, f in enumerate(spec.schema)])
    q.select("*", *[(_convert(f"t{i}", f, f"decl[{lit(f.name)}]"), f"v{i}") for i, f in enumerate(spec.schema)])
    problems = " ".join(_problems(i, f, spec.primary_key) for i, f in enumerate(spec.schema))
    q.select(("k", ROW_KIND_COLUMN), *[(f"v{i}", f.name) for i, f in enumerate(spec.schema)], TS,
             (f"coalesce(rerr, CASE {problems} END)", ERROR), TOPIC, PARTITION, OFFSET, FIRST)
    return q.text


def decode(raw: "DataFrame", spec: DecodeSpec) -> "DataFrame":
    """`raw` Kafka rows decoded (`decode_sql`), as a DataFrame."""
    return _on_view(raw, lambda view: decode_sql(spec, view))


_VIEWS = itertools.count()


def _on_view(raw: "DataFrame", text: Any) -> "DataFrame":
    """`spark.sql(text(view))` where `view` names `raw` (a temporary view of its own, dropped once the query is
    analysed: the DataFrame keeps the plan). Not for a cached `raw`: dropping a temporary view uncaches the data
    cached under its plan (Spark's `dropTempView`); keep a view of it instead (database_decode.decode_tables)."""
    view = f"tablestore_cdc_{os.getpid()}_{next(_VIEWS)}"
    raw.createOrReplaceTempView(view)
    try:
        return raw.sparkSession.sql(text(view))
    finally:
        raw.sparkSession.catalog.dropTempView(view)


def once(sql: str) -> str:
    """`sql`, computed once per row whatever later steps do with its result. Spark's optimizer inlines a projection
    into the next (CollapseProject), so a column the next steps use n times is computed up to n times where code
    generation does not find the repeats: a parsed record parsed n times over (measured: 13x the parse's CPU). It
    never inlines a nondeterministic expression, and this one is, by a test that is always true."""
    return f"IF(spark_partition_id() >= 0, {sql}, NULL)"


def _problems(i: int, f: pa.Field, primary_key: tuple[str, ...]) -> str:
    """SQL `WHEN ... THEN reason` branches of column `i`: a text its type cannot hold (a schema change when it is a
    number too large for the column), a null primary key."""
    t, v = f"t{i}", f"v{i}"
    type_name = spark_type(f.type, f.name).simpleString().upper()
    bad_value = f"concat({lit(f'column {f.name}: cannot read ' + chr(39))}, substr({t}, 1, 60), " \
                f"{lit(chr(39) + ' as ' + type_name)})"
    branches = []
    overflow = _overflows(t, f)
    if overflow is not None:
        branches.append(f"WHEN {t} IS NOT NULL AND {v} IS NULL AND {overflow} THEN "
                        f"concat({lit(SCHEMA_CHANGE + ': ')}, {bad_value})")
    branches.append(f"WHEN {t} IS NOT NULL AND {v} IS NULL THEN {bad_value}")
    if f.name in primary_key:
        branches.append(f"WHEN {v} IS NULL THEN {lit(f'primary-key column {f.name} is null')}")
    return " ".join(branches)


def _needs_declared(type_: pa.DataType) -> bool:
    """Whether a column of `type_` is read by the encoding the record declares (decimals, timestamps, times of day,
    numerics without a scale kept as text)."""
    return (pa.types.is_decimal(type_) or pa.types.is_timestamp(type_) or pa.types.is_int64(type_)
            or pa.types.is_string(type_) or pa.types.is_large_string(type_))


def kept(table: str, format: str, bad_records: str) -> str:
    """SQL over a decoded row (`decode_sql`'s columns): true to pass it on, false to drop it (a bad record under
    `skip`), else `raise_error` (a bad record under `fail`, a schema change, a TRUNCATE) naming `table` (SQL of its
    name), topic, partition, offset and reason."""
    where = (f"' in topic ', {TOPIC}, ' partition ', CAST({PARTITION} AS STRING), ' offset ', "
             f"CAST({OFFSET} AS STRING), ': '")
    raise_change = (f"raise_error(concat({lit(SCHEMA_CHANGE + ': table ')}, {table}, ': schema change', {where}, "
                    f"regexp_replace({ERROR}, {lit(f'^{SCHEMA_CHANGE}: ')}, '')))")
    raise_truncate = (f"raise_error(concat({lit(TRUNCATE + ': table ')}, {table}, ': truncate', {where}, "
                      f"regexp_replace({ERROR}, {lit(f'^{TRUNCATE}: ')}, '')))")
    raise_bad = (f"raise_error(concat({lit(BAD_RECORD + ': table ')}, {table}, {lit(f': bad {format} record')}, "
                 f"{where}, {ERROR}))")
    return (f"CASE WHEN {ERROR} IS NULL THEN true "
            f"WHEN startswith({ERROR}, {lit(SCHEMA_CHANGE)}) THEN CAST({raise_change} AS BOOLEAN) "
            f"WHEN startswith({ERROR}, {lit(TRUNCATE)}) THEN CAST({raise_truncate} AS BOOLEAN) "
            + (f"ELSE CAST({raise_bad} AS BOOLEAN) END" if bad_records == "fail" else "ELSE false END"))


def changes(raw: "DataFrame", spec: DecodeSpec, observation: Any = None) -> "DataFrame":
    """`raw` Kafka rows as a changelog of `spec.table`: `_row_kind` + its columns, with the bad-record policy
    applied (`fail`: the first bad record fails its micro-batch, naming topic, partition, offset and reason;
    `skip`: dropped, each record counted once in the observed metric `bad` of `OBSERVATION`), a schema change
    always failing (message opened by `SCHEMA_CHANGE`). The metric `rows` counts the changes it passes on.
    `observation`: a pyspark Observation (a batch query's), else the metrics are named for the stream."""
    from pyspark.sql import functions as F

    decoded = decode(raw, spec).observe(
        OBSERVATION if observation is None else observation,
        F.expr(f"count(CASE WHEN {ERROR} IS NULL THEN 1 END)").alias("rows"),
        F.expr(f"count(CASE WHEN {ERROR} IS NOT NULL AND {FIRST} THEN 1 END)").alias("bad"),
        F.expr(f"max({TS})").alias("max_ts_ms"), F.expr(f"min({TS})").alias("min_ts_ms"))
    keep = kept(lit(spec.table), spec.format, spec.bad_records)
    return decoded.filter(F.expr(keep)).select(*[F.col(ident(c)) for c in (ROW_KIND_COLUMN, *spec.schema.names)])
