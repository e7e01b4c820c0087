"""Table metadata actions of the `managed` Spark SQL catalog (served by tablestore.spark.catalog_service).

What Spark hands a catalog (a StructType as JSON, identity partition columns, constraints, and properties mixing
Spark's reserved ones, OPTIONS twice, and table options) becomes one `catalog.Catalog.create_table` call, so every
rule and message is the catalog's. Column comments are kept as Arrow field metadata (`comment`), the table comment
in the table's schema file; both come back to Spark on load.

Properties Spark reserves: `provider` (absent or `managed`), `owner` (ignored), `comment` (the table comment),
`location` / `external` (rejected: managed tables live in the warehouse), `option.<k>` (OPTIONS (...), which Spark
also passes as `<k>`). `primary-key` = 'a,b' is the property form of PRIMARY KEY (a, b) NOT ENFORCED.
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import pyarrow as pa

import catalog
from filestore import FileStore, Snapshot, TagNotFoundError
from tablestore.errors import TableStoreError
from tablestore.spark import handover
from tablestore.spark.jvm_write import unshuffled_reason

PRIMARY_KEY_PROPERTY = "primary-key"
COMMENT_KEY = b"comment"
_IGNORED = ("owner", "is_managed_location", "table_type", "collation")
_REJECTED = ("location", "external")


class SqlTableError(TableStoreError):
    """A CREATE/ALTER TABLE asks for something a managed table does not have; names the table."""


def table_catalog(args: Mapping[str, Any]) -> catalog.Catalog:
    warehouse = args.get("warehouse")
    if not warehouse:
        raise SqlTableError("the managed catalog has no warehouse: set spark.sql.catalog.<name>.warehouse")
    return catalog.Catalog(str(warehouse), dict(args.get("options") or {}))


def identifier(args: Mapping[str, Any]) -> str:
    parts = [str(p) for p in args.get("table") or []]
    if len(parts) != 2:
        raise catalog.InvalidIdentifierError(f"table identifier {'.'.join(parts)!r} must be 'database.table'")
    return f"{parts[0]}.{parts[1]}"


def arrow_schema(spark_json: str) -> pa.Schema:
    """The Arrow schema of a Spark StructType (its JSON), column comments kept as field metadata."""
    from pyspark.sql.types import StructType

    from tablestore.spark.types import read_schema

    struct = StructType.fromJson(json.loads(spark_json))
    converted = read_schema(struct)
    fields = []
    for spark_field, field in zip(struct.fields, converted):
        comment = (spark_field.metadata or {}).get("comment")
        fields.append(field.with_metadata({COMMENT_KEY: str(comment).encode()}) if comment is not None else field)
    return pa.schema(fields)


def spark_json(schema: pa.Schema) -> str:
    """The Spark StructType (as JSON) of a table's Arrow schema, with the column comments."""
    from pyspark.sql.types import StructField, StructType

    from tablestore.spark.types import spark_type

    fields = []
    for f in schema:
        comment = (f.metadata or {}).get(COMMENT_KEY)
        metadata = {"comment": comment.decode()} if comment is not None else {}
        fields.append(StructField(f.name, spark_type(f.type, f.name), f.nullable, metadata))
    return StructType(fields).json()


def _primary_key(table: str, constraints: Sequence[Mapping[str, Any]], properties: Mapping[str, str]) -> list[str]:
    declared: list[str] = []
    for c in constraints:
        if c.get("kind") != "primary_key":
            raise SqlTableError(f"table {table!r}: constraint {c.get('ddl') or c.get('name')!r} is not supported; a "
                                f"managed table has a PRIMARY KEY (...) NOT ENFORCED only")
        if declared:
            raise SqlTableError(f"table {table!r}: more than one primary key")
        declared = [str(col) for col in c.get("columns") or []]
    prop = properties.get(PRIMARY_KEY_PROPERTY)
    if prop is not None:
        from_prop = [p.strip() for p in prop.split(",") if p.strip()]
        if declared and from_prop != declared:
            raise SqlTableError(f"table {table!r}: PRIMARY KEY ({', '.join(declared)}) and TBLPROPERTIES "
                                f"'{PRIMARY_KEY_PROPERTY}' = {prop!r} disagree; give one of them")
        declared = declared or from_prop
    return declared


def table_options(table: str, properties: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """(the table options, the table comment) of Spark's CREATE TABLE properties."""
    provider = properties.get("provider")
    if provider is not None and provider.lower() != "managed":
        raise SqlTableError(f"table {table!r}: the managed catalog creates managed tables; USING {provider} is not "
                            f"supported (leave USING out, or USING managed)")
    rejected = [k for k in _REJECTED if k in properties]
    if rejected:
        raise SqlTableError(f"table {table!r}: {', '.join(rejected).upper()} is not supported: managed tables live "
                            f"in the catalog's warehouse")
    options = {}
    for key, value in properties.items():
        if key in ("provider", "comment", PRIMARY_KEY_PROPERTY, *_IGNORED) or key.startswith("option."):
            continue
        options[key] = value
    for key, value in properties.items():   # OPTIONS (k v) arrive as `option.k` and as `k`; both mean k
        if key.startswith("option."):
            options.setdefault(key[len("option."):], value)
    return options, properties.get("comment")


def _key_not_null(schema: pa.Schema, primary_key: Sequence[str]) -> pa.Schema:
    """The primary key's columns made NOT NULL, as Paimon does: SQL declares columns nullable unless told (and a
    CTAS's columns are whatever Spark infers), while a key column never holds a null (a null key is refused when
    written). A key column not in the schema is left for the catalog to report."""
    for name in primary_key:
        index = schema.get_field_index(name)
        if index >= 0 and schema.field(index).nullable:
            schema = schema.set(index, schema.field(index).with_nullable(False))
    return schema


def create_table(args: Mapping[str, Any]) -> dict[str, Any]:
    table = identifier(args)
    properties = {str(k): str(v) for k, v in dict(args.get("properties") or {}).items()}
    options, comment = table_options(table, properties)
    schema = arrow_schema(str(args["schema"]))
    primary_key = _primary_key(table, list(args.get("constraints") or []), properties)
    schema = _key_not_null(schema, primary_key)
    partition_by = [str(p) for p in args.get("partition_keys") or []]
    table_catalog(args).create_table(table, schema, primary_key, partition_by, options, comment=comment)
    return load_table(args)


def _tagged(table: str, store: FileStore, tag: str) -> Snapshot | None:
    """VERSION AS OF 'tag': the tag's snapshot; an unknown tag is an error naming the table and the tag."""
    try:
        return store.resolve_snapshot(tag=tag)
    except TagNotFoundError as e:
        raise SqlTableError(f"{e}; VERSION AS OF takes a snapshot id or a tag name") from None


def load_table(args: Mapping[str, Any]) -> dict[str, Any]:
    """The table's metadata; with `version` (VERSION AS OF: a snapshot id, or else a tag's name) or `timestamp_ms`
    (TIMESTAMP AS OF), also the snapshot that reads it (`read_snapshot_id`; a tag's snapshot reads from the tag's
    copy once it expired, filestore.tags), resolved now so that a bad one is an analysis error."""
    table = identifier(args)
    handle = table_catalog(args).get_table(table)
    schema = handle.schema
    read_snapshot_id = None
    if args.get("version") is not None or args.get("timestamp_ms") is not None:
        version = args.get("version")
        timestamp = args.get("timestamp_ms")
        if version is not None and not str(version).isdigit():
            snapshot = _tagged(table, handle.store, str(version))
        else:
            snapshot = handle.store.resolve_snapshot(None if version is None else int(str(version)),
                                                     None if timestamp is None else int(timestamp))
        if snapshot is None:
            raise SqlTableError(f"table {table!r} has no snapshot to travel to")
        read_snapshot_id = snapshot.id
    meta = {
        "schema": spark_json(schema.arrow_schema),
        "partition_keys": list(schema.partition_keys),
        "primary_key": list(schema.primary_keys),
        "options": dict(sorted(catalog.redact_options(schema.options).items())),   # Spark shows them: no secrets
        "comment": schema.comment,
        "bucket": handle.options.bucket,
        "bucket_key": list(schema.bucket_key_columns),   # the primary key, or the whole row (filestore/bucket.py)
        "bucket_key_types": [str(schema.arrow_schema.field(k).type) for k in schema.bucket_key_columns],
        "snapshot_id": handle.store.snapshots.latest_id(),
        "read_snapshot_id": read_snapshot_id,
        "shuffle_by_bucket": bool(handle.options.get(catalog.SINK_SHUFFLE_BY_BUCKET)),
        "unshuffled_reason": unshuffled_reason(handle.store, handle.log is not None),
    }
    handover.check("table-meta", meta)
    return meta


def drop_table(args: Mapping[str, Any]) -> bool:
    """Removes the table's files and its Kafka topic (catalog.Catalog.drop_table); False when there was none."""
    cat = table_catalog(args)
    table = identifier(args)
    if not cat.table_exists(table):
        return False
    cat.drop_table(table)
    return True


def rename_table(args: Mapping[str, Any]) -> bool:
    """ALTER TABLE ... RENAME TO (catalog.Catalog.rename_table): `table` to `new_table`."""
    table_catalog(args).rename_table(identifier(args), identifier({"table": args.get("new_table")}))
    return True


def alter_table(args: Mapping[str, Any]) -> dict[str, Any]:
    """SET / UNSET TBLPROPERTIES: the options `catalog.options.ALTERABLE` names; the comment. ADD COLUMNS and ALTER
    COLUMN ... TYPE (`add_columns`, `column_types`: Spark StructTypes as JSON): one `catalog.Catalog.alter_table`,
    whose rules and SchemaEvolutionError messages are the same as the Python API's. RENAME COLUMN (`rename`: old
    name -> new name) and DROP COLUMN(S) (`drop`, and `drop_if_exists`: dropped only if the table has them):
    `catalog.Catalog.rename_column` and `drop_column`."""
    table = identifier(args)
    set_options = {str(k): str(v) for k, v in dict(args.get("set") or {}).items()}
    unset = [str(k) for k in args.get("unset") or []]
    if "comment" in set_options or "comment" in unset:
        raise SqlTableError(f"table {table!r}: the table comment is fixed when the table is created")
    cat = table_catalog(args)
    add_columns = list(arrow_schema(str(args["add_columns"]))) if args.get("add_columns") else []
    column_types = arrow_schema(str(args["column_types"])) if args.get("column_types") else pa.schema([])
    if add_columns or len(column_types):
        cat.alter_table(table, add_columns=add_columns, alter_column_types={f.name: f.type for f in column_types})
    for old, new in dict(args.get("rename") or {}).items():
        cat.rename_column(table, str(old), str(new))
    drop = [str(c) for c in args.get("drop") or []]
    if args.get("drop_if_exists"):
        names = cat.get_table(table).schema.arrow_schema.names
        drop += [str(c) for c in args["drop_if_exists"] if c in names]
    if drop:
        cat.drop_column(table, *drop)
    if set_options or unset:
        cat.alter_table_options(table, set_options, unset)
    return load_table(args)
