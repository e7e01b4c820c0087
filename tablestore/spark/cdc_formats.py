"""The CDC formats as Spark SQL (Flink's semantics for each): how one Kafka record becomes zero, one or two row
images with their row kinds. tablestore/spark/cdc_decode.py runs these plans; this module only writes them.

A plan, evaluated per record (the columns `key`, `value`, `timestamp` of Spark's Kafka source, and `e`, the value
parsed once with `from_json(value, envelope)`, each row image a `map<string,string>` of raw JSON texts):
- `pre`: columns computed once per record (e.g. Debezium's payload, with or without the Connect wrapper);
- `items` (canal only): an array each element of which is a record of its own (canal batches rows), exploded with
  its position into `i`, `d` first;
- `error`: why the record is not a change of its format (null: it is); a reason opened by `SCHEMA_CHANGE` says the
  record has columns (or declared types) the table does not have;
- `kinds`: the row kinds it yields (empty: a tombstone, a DDL event), exploded into `k`;
- `row`, `over`: the image of kind `k` (`over`'s fields win: canal's and Maxwell's `old` values in a -U, an
  upsert value over its key); `ts`: the event's time in ms.

| format | +I | -U, +U | -D | nothing |
|---|---|---|---|---|
| debezium-json | op c, r (after) | op u: before, after (before null: +U only, an upsert) | op d (before) | tombstone |
| upsert-json | | value: +U | tombstone: -D of the key | |
| canal-json | INSERT data[i] | UPDATE: data[i] with old[i] over it, data[i] | DELETE data[i] | isDdl, DDL types |
| maxwell-json | insert, bootstrap-insert | update: data with old over it, data | delete | bootstrap-start/complete, DDL |
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tablestore.cdc.schemas import CONNECT_TYPES, fits

SCHEMA_CHANGE = "TABLESTORE_CDC_SCHEMA_CHANGE"
ROWMAP = "MAP<STRING,STRING>"
NO_KINDS = "CAST(array() AS ARRAY<STRING>)"


def lit(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Plan:
    envelope: str
    error: str
    kinds: str
    row: str
    ts: str
    over: str | None = None
    pre: tuple[tuple[str, str], ...] = ()
    items: str | None = None


def _within(items: str, allowed: list[str]) -> str:
    """SQL: every element of the string array `items` is one of `allowed` (a hash set difference, not a scan)."""
    return f"size(array_except({items}, array({', '.join(lit(a) for a in allowed)}))) = 0"


def _known(names: list[str], keys: str) -> str:
    """SQL: every name of the array `keys` is one of `names` (the table's columns)."""
    return _within(keys, names)


def _change(detail: str) -> str:
    return lit(f"{SCHEMA_CHANGE}: {detail}")


def connect_types_taken(type_: pa.DataType) -> list[str]:
    """The Connect types (a Debezium wrapper's `type`) whose values a column of `type_` holds as they are."""
    taken = [name for name, t in CONNECT_TYPES.items() if fits(t, type_)]
    if pa.types.is_decimal(type_):
        taken += ["bytes", "string", "double", "float64"]
    if pa.types.is_timestamp(type_):
        taken += ["int64", "string"]
    if pa.types.is_date(type_):
        taken += ["int32"]
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        taken += ["bytes"]
    if pa.types.is_list(type_):
        taken += ["array"]
    return sorted(set(taken))


DECLARED_FIELDS = "filter(e.schema.fields, f -> f.field IN ('after', 'before'))[0].fields"
"""SQL: the Connect schema of a Debezium record's row images (null without the wrapper)."""


def debezium(schema: pa.Schema) -> Plan:
    images = f"before {ROWMAP}, after {ROWMAP}, op STRING, ts_ms BIGINT"
    fields = "fields ARRAY<STRUCT<field STRING, type STRING, name STRING, parameters MAP<STRING,STRING>>>"
    envelope = f"STRUCT<schema STRUCT<fields ARRAY<STRUCT<field STRING, {fields}>>>, payload STRUCT<{images}>, {images}>"
    payload = ("IF(e.payload IS NOT NULL, e.payload, named_struct('before', e.before, 'after', e.after, 'op', e.op, "
               "'ts_ms', e.ts_ms))")
    taken = [f"{f.name}:{t}" for f in schema for t in connect_types_taken(f.type)]
    declared_ok = _within(f"transform({DECLARED_FIELDS}, x -> concat(x.field, ':', x.type))", taken)
    bare_ok = _known(schema.names, "map_keys(coalesce(p.after, p.before))")
    error = f"""CASE
      WHEN value IS NULL THEN NULL
      WHEN p.op IS NULL THEN 'not a Debezium change event (no ''op'')'
      WHEN p.op IN ('c', 'r', 'u') AND p.after IS NULL THEN concat('op ', p.op, ' without ''after''')
      WHEN p.op = 'd' AND p.before IS NULL THEN 'op ''d'' without ''before'''
      WHEN p.op NOT IN ('c', 'r', 'u', 'd') THEN concat('unsupported op ', p.op)
      WHEN NOT coalesce(IF(e.payload IS NOT NULL, {declared_ok}, {bare_ok}), true)
        THEN {_change("its columns or their types are not the table's")}
    END"""
    kinds = f"""CASE
      WHEN value IS NULL THEN {NO_KINDS}
      WHEN p.op IN ('c', 'r') THEN array('+I')
      WHEN p.op = 'u' AND p.before IS NULL THEN array('+U')
      WHEN p.op = 'u' THEN array('-U', '+U')
      ELSE array('-D')
    END"""
    return Plan(envelope, error, kinds, row="IF(k IN ('-U', '-D'), p.before, p.after)", ts="p.ts_ms",
                pre=(("p", payload),))


def upsert(schema: pa.Schema) -> Plan:
    """The value (a JSON object) upserts (+U; the key's fields fill what the value lacks); a tombstone deletes the
    key (-D with the key's fields)."""
    error = f"""CASE
      WHEN value IS NULL AND kmap IS NULL THEN 'a tombstone (null value) without a JSON object key'
      WHEN value IS NOT NULL AND e IS NULL THEN 'the value is not a JSON object'
      WHEN value IS NOT NULL AND NOT {_known(schema.names, 'map_keys(e)')}
        THEN {_change("it has columns the table does not have")}
    END"""
    kinds = "IF(value IS NULL, array('-D'), array('+U'))"
    return Plan(ROWMAP, error, kinds, row="kmap", over="e", ts="unix_millis(timestamp)",
                pre=(("kmap", f"from_json(CAST(key AS STRING), '{ROWMAP}')"),))


def canal(schema: pa.Schema) -> Plan:
    envelope = f"STRUCT<data ARRAY<{ROWMAP}>, old ARRAY<{ROWMAP}>, type STRING, es BIGINT, ts BIGINT, isDdl BOOLEAN>"
    ddl = "('CREATE', 'ALTER', 'ERASE', 'QUERY', 'TRUNCATE', 'RENAME', 'CINDEX', 'DINDEX')"
    skipped = f"value IS NULL OR coalesce(e.isDdl, false) OR e.type IN {ddl}"
    error = f"""CASE
      WHEN {skipped} THEN NULL
      WHEN e.type IS NULL THEN 'not a canal-json change (no ''type'')'
      WHEN e.type NOT IN ('INSERT', 'UPDATE', 'DELETE') THEN concat('unsupported type ', e.type)
      WHEN e.data IS NULL THEN concat(e.type, ' without ''data''')
      WHEN NOT forall(e.data, d -> {_known(schema.names, 'map_keys(d)')})
        THEN {_change("it has columns the table does not have")}
    END"""
    kinds = f"""CASE
      WHEN {skipped} THEN {NO_KINDS}
      WHEN e.type = 'INSERT' THEN array('+I')
      WHEN e.type = 'UPDATE' THEN array('-U', '+U')
      ELSE array('-D')
    END"""
    return Plan(envelope, error, kinds, row="d", over="IF(k = '-U', get(e.old, i), NULL)", ts="coalesce(e.es, e.ts)",
                items=f"IF({skipped}, array(), e.data)")


def maxwell(schema: pa.Schema) -> Plan:
    envelope = f"STRUCT<data {ROWMAP}, old {ROWMAP}, type STRING, ts BIGINT>"
    skipped = ("value IS NULL OR e.type IN ('bootstrap-start', 'bootstrap-complete') OR e.type LIKE '%-create' "
               "OR e.type LIKE '%-alter' OR e.type LIKE '%-drop'")
    error = f"""CASE
      WHEN {skipped} THEN NULL
      WHEN e.type IS NULL THEN 'not a maxwell-json change (no ''type'')'
      WHEN e.type NOT IN ('insert', 'bootstrap-insert', 'update', 'delete') THEN concat('unsupported type ', e.type)
      WHEN e.data IS NULL THEN concat(e.type, ' without ''data''')
      WHEN NOT {_known(schema.names, 'map_keys(e.data)')} THEN {_change("it has columns the table does not have")}
    END"""
    kinds = f"""CASE
      WHEN {skipped} THEN {NO_KINDS}
      WHEN e.type IN ('insert', 'bootstrap-insert') THEN array('+I')
      WHEN e.type = 'update' THEN array('-U', '+U')
      ELSE array('-D')
    END"""
    return Plan(envelope, error, kinds, row="e.data", over="IF(k = '-U', e.old, NULL)", ts="e.ts * 1000")


PLANS = {"debezium-json": debezium, "upsert-json": upsert, "canal-json": canal, "maxwell-json": maxwell}
