"""The CDC formats as Spark SQL (Flink's semantics for each): how one Kafka record becomes zero, one or two row
images with their row kinds. tablestore/spark/cdc_decode.py runs these plans; this module only writes them.

A plan, evaluated per record (the columns `timestamp` of Spark's Kafka source, `key` where a plan says it needs
it, `tomb` (the value is null: a tombstone) and `e`, the value parsed once with `from_json(value, envelope)`, each
row image a `map<string,string>` of raw JSON texts):
- `pre`: columns computed once per record (e.g. Debezium's payload, with or without the Connect wrapper);
- `items` (canal only): an array each element of which is a record of its own (canal batches rows), exploded with
  its position into `i`, `d` first;
- `error`: why the record is not a change of its format (null: it is); a reason opened by `SCHEMA_CHANGE` says the
  record has columns (or declared types) the table does not have;
- `source` (with `DecodeSpec.source_table`): the record's database, schema and table; a record naming another
  table than `source_table` has no error and no kinds (`other_table`: never a bad record nor a schema change);
- `kinds`: the row kinds it yields (empty: a tombstone, a DDL event), exploded into `k`;
- `row`, `over`: the image of kind `k` (`over`'s fields win: canal's and Maxwell's `old` values in a -U, an
  upsert value over its key); `ts`: the event's time in ms.

| format | +I | -U, +U | -D | nothing |
|---|---|---|---|---|
| debezium-json | op c, r (after) | op u: before, after (before null: +U only, an upsert) | op d (before) | tombstone |
| upsert-json | | value: +U | tombstone: -D of the key | |
| canal-json | INSERT, INIT data[i] | UPDATE: data[i] with old[i] over it, data[i] | DELETE data[i] | isDdl, DDL types |
| maxwell-json | insert, bootstrap-insert | update: data with old over it, data | delete | bootstrap-start/complete, DDL |
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from tablestore.cdc.schemas import CONNECT_TYPES, PAYLOAD_MARK, KnownSchema, Signature, fits, source_table_parts

SCHEMA_CHANGE = "TABLESTORE_CDC_SCHEMA_CHANGE"
TRUNCATE = "TABLESTORE_CDC_TRUNCATE"
"""Opens the error of a TRUNCATE record the decoder does not take itself (`ingest.truncate` = `apply`: the ingest job
applies it and restarts past it; `fail`)."""
ROWMAP = "MAP<STRING,STRING>"
NO_KINDS = "CAST(array() AS ARRAY<STRING>)"
NO_NAME = "CAST(NULL AS STRING)"
NO_REPLICA_IDENTITY = ("op 'd' without 'before': the source table has no replica identity (PostgreSQL: ALTER TABLE "
                       "... REPLICA IDENTITY FULL, or give the table a primary key)")
"""A Debezium delete with neither image: PostgreSQL's for a table whose replica identity is NOTHING (or DEFAULT
without a primary key)."""


def lit(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


NO_DECLARED = "CAST(NULL AS MAP<STRING, STRUCT<name: STRING, scale: STRING>>)"
BadRecords = Literal["fail", "skip"]
TruncatePolicy = Literal["apply", "ignore", "fail"]


@dataclass(frozen=True)
class TruncateBarrier:
    """The position of the last TRUNCATE an ingest job applied: the records at or before it (by PostgreSQL's LSN
    where the record has one, else by offset within the truncate's own Kafka partition) were emptied by it and give
    no rows."""

    topic: str
    partition: int
    offset: int
    lsn: int | None = None

    def sql(self) -> str:
        """SQL: the record (columns `lsn`, `__cdc_topic`, `__cdc_partition`, `__cdc_offset`) is at or before it."""
        by_lsn = f"(lsn IS NOT NULL AND lsn <= {self.lsn}) OR " if self.lsn is not None else ""
        return (f"({by_lsn}(__cdc_topic = {lit(self.topic)} AND __cdc_partition = {self.partition} "
                f"AND __cdc_offset <= {self.offset}))")


@dataclass(frozen=True)
class DecodeSpec:
    """What to decode: records of `format` for `table` with Arrow `schema` and `primary_key`."""

    format: str
    table: str
    schema: pa.Schema
    primary_key: tuple[str, ...]
    bad_records: BadRecords = "fail"
    known: tuple[KnownSchema, ...] = ()
    """Debezium schemas the table takes as they are (fast paths: see `debezium`)."""
    before_images: bool = True
    """False: an update that keeps the primary key yields only its after image (+U), which a primary-key table's
    merge applies the same way as -U then +U (what `tablestore ingest` writes: a quarter fewer rows); an update that
    changes the key keeps its -U."""
    truncate: TruncatePolicy = "fail"
    """A Debezium TRUNCATE (`op: t`): `ignore` gives no rows; `apply` and `fail` end the micro-batch with a `TRUNCATE`
    error naming the record and its LSN (the ingest job applies it: tablestore/spark/ingest.py)."""
    barrier: TruncateBarrier | None = None
    """The last TRUNCATE applied: records at or before it give no rows."""
    source_table: str | None = None
    """The source table whose records are the table's (`table`, `database.table` or `schema.table`,
    `database.schema.table`: tablestore.cdc.schemas.SourceTable); a record naming another gives no rows. None: every
    record (upsert-json records name no table: it must be None)."""


@dataclass(frozen=True)
class Plan:
    envelope: str
    error: str
    kinds: str
    row: str
    ts: str
    over: str | None = None
    pre: tuple[tuple[tuple[str, str], ...], ...] = ()
    """Steps of columns computed from the parsed record, each step in one projection."""
    items: str | None = None
    declared: str = NO_DECLARED
    """SQL: per column, the record's declared logical type name and scale (Debezium's wrapper; else null)."""
    needs_key: bool = False
    parse: tuple[tuple[tuple[str, str], ...], ...] = ()
    """Steps computing the parsed record from `value` (default: `e` = from_json(value, envelope)), each computed
    once per record (see cdc_decode.once)."""
    struct_row: str | None = None
    """SQL: the row image of kind `k` as a struct of the table's columns (text), where the record was parsed so
    (Debezium's fast path); null: `row`'s map."""
    carry: tuple[tuple[str, str], ...] = ()
    """Columns (name, SQL of the parsed record) that `row`, `over` and `items` use: only these are carried through
    the explode (copying the whole parsed record into each row is the dearest thing a decoder can do)."""
    source: tuple[str, str, str] | None = None
    """SQL: the source database, schema and table the record names (null: none); None: the format names none."""


def other_table(spec: DecodeSpec, plan: Plan) -> str:
    """SQL: the record names a source table that is not `spec.source_table` (SourceTable.matches' rule: `table`;
    `q.table` where q is the database or the schema; `database.schema.table`). A record naming none is the table's."""
    if spec.source_table is None:
        return "false"
    if plan.source is None:
        raise ValueError(f"{spec.format} records name no source table: decode them without one")
    database, schema, table = plan.source
    parts = [lit(p) for p in source_table_parts(spec.source_table)]
    if len(parts) == 1:
        match = f"{table} = {parts[0]}"
    elif len(parts) == 2:
        match = f"{table} = {parts[1]} AND ({database} <=> {parts[0]} OR {schema} <=> {parts[0]})"
    else:
        match = f"{database} <=> {parts[0]} AND {schema} <=> {parts[1]} AND {table} = {parts[2]}"
    return f"({table} IS NOT NULL AND NOT ({match}))"


def _within(items: str, allowed: list[str]) -> str:
    """SQL: every element of the string array `items` is one of `allowed` (a hash set difference, not a scan)."""
    return f"size(array_except({items}, array({', '.join(lit(a) for a in allowed)}))) = 0"


def _known(names: list[str], keys: str) -> str:
    """SQL: every name of the array `keys` is one of `names` (the table's columns)."""
    return _within(keys, names)


def _change(detail: str) -> str:
    return lit(f"{SCHEMA_CHANGE}: {detail}")


def _same_key(spec: DecodeSpec, before: str, after: str, struct: bool = False) -> str:
    """SQL: (unless before images are kept) the two row images (maps, or structs) have the same primary key."""
    if spec.before_images or not spec.primary_key:
        return "false"
    field = (lambda img, k: f"{img}.{ident(k)}") if struct else (lambda img, k: f"{img}[{lit(k)}]")
    return " AND ".join(f"{field(before, k)} <=> {field(after, k)}" for k in spec.primary_key)


def ident(name: str) -> str:
    """A Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _key_kept(spec: DecodeSpec, old: str) -> str:
    """SQL: (unless before images are kept) an update's `old` fields (canal, Maxwell) hold no primary-key column."""
    if spec.before_images or not spec.primary_key:
        return "false"
    keys = ", ".join(lit(k) for k in spec.primary_key)
    return f"NOT exists(map_keys(coalesce({old}, CAST(map() AS {ROWMAP}))), x -> x IN ({keys}))"


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
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        taken += ["struct", "array", "map"]   # kept as JSON text (a numeric without a scale: its decimal text)
    return sorted(set(taken))


DECLARED = ("IF(get(e.schema.fields, 0).field = 'before', get(e.schema.fields, 0).fields, "
            "filter(e.schema.fields, f -> f.field IN ('after', 'before'))[0].fields)")
"""SQL: the Connect schema of a Debezium record's row images (null without the wrapper), as Spark parses it: the
record's *signature* (field, type, name, parameters.scale of each column)."""


def _signature_sql(signature: Signature) -> str:
    def s(v: str | None) -> str:
        return "CAST(NULL AS STRING)" if v is None else lit(v)

    def params(has: bool, scale: str | None) -> str:
        return f"named_struct('scale', {s(scale)})" if has else "CAST(NULL AS STRUCT<scale: STRING>)"

    fields = [f"named_struct('field', {s(f)}, 'type', {s(t)}, 'name', {s(n)}, 'parameters', {params(h, sc)})"
              for f, t, n, h, sc in signature]
    return f"array({', '.join(fields)})"


def _declared_map(signature: Signature) -> str:
    def s(v: str | None) -> str:
        return "CAST(NULL AS STRING)" if v is None else lit(v)

    entries = ", ".join(f"{lit(f)}, named_struct('name', {s(n)}, 'scale', {s(sc)})" for f, _, n, _, sc in signature if f)
    return f"map({entries})" if entries else NO_DECLARED


def debezium(spec: DecodeSpec) -> Plan:
    """Debezium JSON, with or without the Kafka Connect wrapper, detected per record.

    `spec.known` (learned by the caller from records it read, tablestore.cdc.known_schema) are schemas the table
    takes as they are. A record whose text up to `,"payload":` is byte for byte a known schema's is *fast*: only its
    payload is parsed, its row images as structs of the table's columns (what a hand-written `from_json` of the
    payload costs), and its declared types are constants. A record whose parsed schema is a known one's skips the
    field-by-field check. Any other record is parsed whole and checked field by field."""
    schema, known = spec.schema, spec.known
    routed = spec.source_table is not None   # the source's names parsed only where they are looked at
    names = ", db STRING, `schema` STRING, `table` STRING" if routed else ""
    images = f"before {ROWMAP}, after {ROWMAP}, op STRING, ts_ms BIGINT, source STRUCT<lsn BIGINT{names}>"
    fields = "fields ARRAY<STRUCT<field STRING, type STRING, name STRING, parameters STRUCT<scale STRING>>>"
    envelope = f"STRUCT<schema STRUCT<fields ARRAY<STRUCT<field STRING, {fields}>>>, payload STRUCT<{images}>, {images}>"
    row = "STRUCT<" + ", ".join(f"{ident(n)}: STRING" for n in schema.names) + ">"
    fast_names = ", db: STRING, `schema`: STRING, `table`: STRING" if routed else ""
    fast_payload = (f"STRUCT<before: {row}, after: {row}, op: STRING, ts_ms: BIGINT, "
                    f"source: STRUCT<lsn: BIGINT{fast_names}>>")
    text = "CAST(value AS STRING)"
    heads = [(i + 1, (k.head + PAYLOAD_MARK).encode()) for i, k in enumerate(known) if k.head]
    fast = (f"CASE {' '.join(f'WHEN startswith(value, X{lit(h.hex())}) THEN {i}' for i, h in heads)} ELSE 0 END"
            if heads else "0")
    skip = (f"CASE fast {' '.join(f'WHEN {i} THEN {len(h)}' for i, h in heads)} END"   # bytes before the payload
            if heads else "0")
    payload_text = f"CAST(substr(value, {skip} + 1, octet_length(value) - {skip} - 1) AS STRING)"
    parse = ((("fast", fast),),
             (("f", f"IF(fast > 0, from_json({payload_text}, {lit(fast_payload)}), NULL)"),
              ("e", f"IF(fast > 0, NULL, from_json({text}, {lit(envelope)}))")))
    payload = ("IF(e.payload IS NOT NULL, e.payload, named_struct('before', e.before, 'after', e.after, 'op', e.op, "
               "'ts_ms', e.ts_ms, 'source', e.source))")
    by_signature = " ".join(f"WHEN sig = {_signature_sql(k.signature)} THEN {i + 1}" for i, k in enumerate(known))
    pre = ((("p", f"IF(fast > 0, NULL, {payload})"), ("sig", f"IF(fast > 0, NULL, {DECLARED})")),
           (("known", f"CASE WHEN fast > 0 THEN fast {by_signature} ELSE 0 END"),
            ("op", "IF(fast > 0, f.op, p.op)"), ("src", "IF(fast > 0, f.source, p.source)"),
            ("lsn", "IF(fast > 0, f.source.lsn, p.source.lsn)"),
            ("has_before", "IF(fast > 0, f.before IS NOT NULL, p.before IS NOT NULL)"),
            ("has_after", "IF(fast > 0, f.after IS NOT NULL, p.after IS NOT NULL)")))
    taken = [f"{f.name}:{t}" for f in schema for t in connect_types_taken(f.type)]
    declared_ok = _within("transform(sig, x -> concat(x.field, ':', x.type))", taken)
    bare_ok = _known(schema.names, "map_keys(coalesce(p.after, p.before))")
    passed = spec.barrier.sql() if spec.barrier is not None else "false"
    refused = "" if spec.truncate == "apply" else (" and ingest.truncate is 'fail' (set it to 'apply' to empty "
                                                   "the table there, or 'ignore')")
    truncate = ("NULL" if spec.truncate == "ignore" else
                f"concat({lit(TRUNCATE + ': ')}, 'TRUNCATE', IF(lsn IS NULL, '', concat(' at LSN ', lsn)), "
                f"{lit(refused)})")
    error = f"""CASE
      WHEN tomb THEN NULL
      WHEN op IS NULL THEN 'not a Debezium change event (no ''op'')'
      WHEN {passed} THEN NULL
      WHEN op = 't' THEN {truncate}
      WHEN op IN ('c', 'r', 'u') AND NOT has_after THEN concat('op ', op, ' without ''after''')
      WHEN op = 'd' AND NOT has_before AND NOT has_after THEN {lit(NO_REPLICA_IDENTITY)}
      WHEN op = 'd' AND NOT has_before THEN 'op ''d'' without ''before'''
      WHEN op NOT IN ('c', 'r', 'u', 'd') THEN concat('unsupported op ', op)
      WHEN known > 0 THEN NULL
      WHEN NOT coalesce(IF(e.payload IS NOT NULL, {declared_ok}, {bare_ok}), true)
        THEN {_change("its columns or their types are not the table's")}
    END"""
    same_key = (f"IF(fast > 0, {_same_key(spec, 'f.before', 'f.after', struct=True)}, "
                f"{_same_key(spec, 'p.before', 'p.after')})")
    kinds = f"""CASE
      WHEN tomb OR {passed} OR op = 't' THEN {NO_KINDS}
      WHEN op IN ('c', 'r') THEN array('+I')
      WHEN op = 'u' AND NOT has_before THEN array('+U')
      WHEN op = 'u' AND {same_key} THEN array('+U')
      WHEN op = 'u' THEN array('-U', '+U')
      ELSE array('-D')
    END"""
    computed = ("map_from_entries(transform(sig, x -> struct(x.field, named_struct('name', x.name, 'scale', "
                "x.parameters.scale))))")
    constants = " ".join(f"WHEN {i + 1} THEN {_declared_map(k.signature)}" for i, k in enumerate(known))
    declared = f"CASE known {constants} ELSE {computed} END" if known else computed
    return Plan(envelope, error, kinds, row="IF(k IN ('-U', '-D'), before, after)",
                ts="IF(fast > 0, f.ts_ms, p.ts_ms)", parse=parse, pre=pre, declared=declared,
                carry=(("before", "p.before"), ("after", "p.after"), ("fb", "f.before"), ("fa", "f.after")),
                struct_row="IF(k IN ('-U', '-D'), fb, fa)",
                source=("src.db", "src.`schema`", "src.`table`") if routed else None)


def upsert(spec: DecodeSpec) -> Plan:
    """The value (a JSON object) upserts (+U; the key's fields fill what the value lacks); a tombstone deletes the
    key (-D with the key's fields)."""
    schema = spec.schema
    error = f"""CASE
      WHEN tomb AND kmap IS NULL THEN 'a tombstone (null value) without a JSON object key'
      WHEN NOT tomb AND e IS NULL THEN 'the value is not a JSON object'
      WHEN NOT tomb AND NOT {_known(schema.names, 'map_keys(e)')}
        THEN {_change("it has columns the table does not have")}
    END"""
    kinds = "IF(tomb, array('-D'), array('+U'))"
    return Plan(ROWMAP, error, kinds, row="kmap", over="vmap", ts="unix_millis(timestamp)",
                carry=(("kmap", "kmap"), ("vmap", "e")),
                pre=((("kmap", f"from_json(CAST(key AS STRING), '{ROWMAP}')"),),), needs_key=True)


def canal(spec: DecodeSpec) -> Plan:
    schema = spec.schema
    envelope = (f"STRUCT<data ARRAY<{ROWMAP}>, old ARRAY<{ROWMAP}>, type STRING, es BIGINT, ts BIGINT, isDdl BOOLEAN, "
                f"`database` STRING, `table` STRING>")
    ddl = "('CREATE', 'ALTER', 'ERASE', 'QUERY', 'TRUNCATE', 'RENAME', 'CINDEX', 'DINDEX')"
    skipped = f"tomb OR coalesce(e.isDdl, false) OR e.type IN {ddl}"
    error = f"""CASE
      WHEN {skipped} THEN NULL
      WHEN e.type IS NULL THEN 'not a canal-json change (no ''type'')'
      WHEN e.type NOT IN ('INSERT', 'INIT', 'UPDATE', 'DELETE') THEN concat('unsupported type ', e.type)
      WHEN e.data IS NULL THEN concat(e.type, ' without ''data''')
      WHEN NOT forall(e.data, d -> {_known(schema.names, 'map_keys(d)')})
        THEN {_change("it has columns the table does not have")}
    END"""
    kinds = f"""CASE
      WHEN {skipped} THEN {NO_KINDS}
      WHEN e.type IN ('INSERT', 'INIT') THEN array('+I')
      WHEN e.type = 'UPDATE' THEN array('-U', '+U')
      ELSE array('-D')
    END"""
    return Plan(envelope, error, kinds, row="d", over="IF(k = '-U', get(old, i), NULL)", ts="coalesce(e.es, e.ts)",
                carry=(("old", "e.old"),),
                items=f"IF({skipped}, array(), e.data)", source=("e.`database`", NO_NAME, "e.`table`"))


def maxwell(spec: DecodeSpec) -> Plan:
    schema = spec.schema
    envelope = f"STRUCT<data {ROWMAP}, old {ROWMAP}, type STRING, ts BIGINT, `database` STRING, `table` STRING>"
    skipped = ("tomb OR e.type IN ('bootstrap-start', 'bootstrap-complete') OR e.type LIKE '%-create' "
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
      WHEN e.type = 'update' AND {_key_kept(spec, "e.old")} THEN array('+U')
      WHEN e.type = 'update' THEN array('-U', '+U')
      ELSE array('-D')
    END"""
    return Plan(envelope, error, kinds, row="data", over="IF(k = '-U', old, NULL)", ts="e.ts * 1000",
                carry=(("data", "e.data"), ("old", "e.old")), source=("e.`database`", NO_NAME, "e.`table`"))


PLANS = {"debezium-json": debezium, "upsert-json": upsert, "canal-json": canal, "maxwell-json": maxwell}
