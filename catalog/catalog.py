"""A filesystem catalog over a warehouse URL (a local path or any fsspec URL).

    <warehouse>/<database>.db/_DATABASE          marker: the database exists (JSON properties)
    <warehouse>/<database>.db/<table>/...        the table's file store (see filestore.paths)

A table exists exactly when its `schema/schema-0` exists; CREATE TABLE publishes it with an exclusive create and
DROP TABLE removes the whole table directory. Names can never escape the warehouse.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import pyarrow as pa

from catalog.errors import (
    DatabaseAlreadyExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    InvalidIdentifierError,
    InvalidOptionError,
    InvalidTableError,
    SchemaEvolutionError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from catalog.evolution import drop_columns, evolve_schema, rename_column
from catalog.fs_options import environment_catalog_options, is_catalog_option, s3_settings
from catalog.identifiers import check_name
from catalog.merge_options import check_added_columns, check_merge_options
from catalog.partition_options import check_partition_expire_options
from catalog.logconfig import check_format_options, log_store_options, resolve_log_options
from catalog.options import BUCKET, FIELDS, SEQUENCE_FIELD, alter_options, session_defaults, validate_table_options
from catalog.table_options import TableOptions
from filestore import (
    SYSTEM_COLUMNS, FileIO, FileStore, KeyCodec, KeyCodecError, SchemaManager, TablePaths, TableSchema,
    check_conditional_writes,
)
from logstore import LogStore, LogStoreError

log = logging.getLogger(__name__)

DATABASE_MARKER = "_DATABASE"
RESERVED_COLUMNS = (*SYSTEM_COLUMNS, "_row_kind")


def parse_identifier(identifier: str) -> tuple[str, str]:
    """'db.table' -> ('db', 'table')."""
    parts = identifier.split(".") if isinstance(identifier, str) else []
    if len(parts) != 2:
        raise InvalidIdentifierError(f"table identifier {identifier!r} must be 'database.table'")
    return check_name(parts[0], "database"), check_name(parts[1], "table")


@dataclass(frozen=True)
class CatalogTable:
    """A loaded table: its identifier, directory, schema, typed options and file store."""

    identifier: str
    path: str
    schema: TableSchema
    options: TableOptions
    store: FileStore
    log: LogStore | None


@dataclass(frozen=True)
class _SchemaHistory:
    """The Arrow schemas of every version of a table (its `schema-<id>` files), for a log store reading records
    written before the table's schema changed (logstore: debezium-avro's writer schemas)."""

    io: FileIO
    path: str

    def __call__(self) -> list[pa.Schema]:
        manager = SchemaManager(self.io, TablePaths(self.path))
        return [manager.get(i).arrow_schema for i in manager.schema_ids()]


def _referenced(options: TableOptions) -> dict[str, str]:
    """The columns the table's options name (column -> option key): they are never renamed or dropped."""
    found = {c: SEQUENCE_FIELD.key for c in options.merge_engine().sequence_fields}
    for key in options.map_option(FIELDS):
        found.setdefault(key.rsplit(".", 1)[0], f"{FIELDS.key}.{key}")
    return found


_PARTITION_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_date,
                    pa.types.is_boolean)


def _within(path: str, root: str) -> bool:
    """Whether `path`, its symbolic links resolved, is `root` or under it (its links resolved too)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


class Catalog:
    def __init__(self, warehouse: str, options: Mapping[str, str] | None = None) -> None:
        """`options`: catalog options (`s3.endpoint`, ...: catalog.fs_options, over those of the environment's
        TABLESTORE_CATALOG_OPTIONS) and table defaults for every new table (`table-storage.<table option>`). On an object store, the store must honour conditional writes
        (checked here, once per bucket and process): else ConditionalWriteUnsupportedError."""
        self.warehouse = warehouse
        given = dict(options or {})
        self.catalog_options = {**environment_catalog_options(),
                                **{k: str(v) for k, v in given.items() if is_catalog_option(k)}}
        self.session_options = session_defaults({k: v for k, v in given.items() if not is_catalog_option(k)})
        settings = s3_settings(self.catalog_options)
        self.io, self.root = FileIO.from_url(warehouse, settings)
        if self.io.object_store:
            check_conditional_writes(self.io.fs, self.root, settings.endpoint)

    # -- databases -----------------------------------------------------------------------------
    def _db_path(self, name: str) -> str:
        return self._inside(f"{self.root}/{check_name(name, 'database')}.db", f"database {name!r}")

    def _inside(self, path: str, what: str) -> str:
        """`path`, which must not leave the warehouse through a symbolic link (a local warehouse; an object store
        has none): else InvalidIdentifierError, so nothing is read, written or deleted through it."""
        if self.io.object_store or not os.path.lexists(path) or _within(path, self.root):
            return path
        raise InvalidIdentifierError(f"{what}: {path} leads to {os.path.realpath(path)}, outside the warehouse "
                                     f"{self.warehouse}, through a symbolic link; tablestore does not follow it")

    def database_path(self, name: str) -> str:
        """The directory of database `name` (its tables' directories are in it)."""
        return self._db_path(name)

    def database_exists(self, name: str) -> bool:
        return self.io.exists(f"{self._db_path(name)}/{DATABASE_MARKER}")

    def create_database(
        self, name: str, ignore_if_exists: bool = False, properties: Mapping[str, str] | None = None
    ) -> None:
        marker = f"{self._db_path(name)}/{DATABASE_MARKER}"
        if not self.io.create_exclusive(marker, json.dumps(dict(properties or {})).encode()):
            if not ignore_if_exists:
                raise DatabaseAlreadyExistsError(f"database {name!r} already exists in {self.warehouse}")

    def database_properties(self, name: str) -> dict[str, str]:
        marker = f"{self._db_path(name)}/{DATABASE_MARKER}"
        if not self.io.exists(marker):
            raise DatabaseNotFoundError(f"database {name!r} does not exist in {self.warehouse}")
        return {str(k): str(v) for k, v in json.loads(self.io.read_bytes(marker).decode() or "{}").items()}

    def list_databases(self) -> list[str]:
        names = []
        for status in self.io.list_dir(self.root):
            base = status.path.rsplit("/", 1)[-1]
            if status.is_dir and base.endswith(".db") and self.io.exists(f"{status.path}/{DATABASE_MARKER}"):
                names.append(base[: -len(".db")])
        return sorted(names)

    def drop_database(self, name: str, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        if not self.database_exists(name):
            if ignore_if_not_exists:
                return
            raise DatabaseNotFoundError(f"database {name!r} does not exist in {self.warehouse}")
        tables = self.list_tables(name)
        if tables and not cascade:
            raise DatabaseNotEmptyError(
                f"database {name!r} is not empty (tables: {', '.join(tables)}); drop it with cascade=True"
            )
        for table in tables:
            self.drop_table(f"{name}.{table}", ignore_if_not_exists=True)
        self.io.delete_dir(self._db_path(name))

    # -- tables --------------------------------------------------------------------------------
    def _table_path(self, database: str, table: str) -> str:
        return self._inside(f"{self._db_path(database)}/{table}", f"table '{database}.{table}'")

    def table_exists(self, identifier: str) -> bool:
        db, table = parse_identifier(identifier)
        return self.io.exists(TablePaths(self._table_path(db, table)).schema_file(0))

    def list_tables(self, database: str) -> list[str]:
        if not self.database_exists(database):
            raise DatabaseNotFoundError(f"database {database!r} does not exist in {self.warehouse}")
        names = []
        for status in self.io.list_dir(self._db_path(database)):
            name = status.path.rsplit("/", 1)[-1]
            if status.is_dir and self.io.exists(TablePaths(status.path).schema_file(0)):
                names.append(name)
        return sorted(names)

    def create_table(
        self,
        identifier: str,
        schema: pa.Schema,
        primary_key: Sequence[str] | None = None,
        partition_by: Sequence[str] | None = None,
        options: Mapping[str, str] | None = None,
        ignore_if_exists: bool = False,
        comment: str | None = None,
    ) -> CatalogTable:
        db, name = parse_identifier(identifier)
        if not self.database_exists(db):
            raise DatabaseNotFoundError(f"database {db!r} does not exist (creating table {identifier!r})")
        table_options = validate_table_options(options or {})
        if ignore_if_exists and self.table_exists(identifier):
            return self.get_table(identifier)
        effective = {**self.session_options, **table_options}
        table_schema = self._validate_schema(identifier, schema, primary_key or (), partition_by or (), effective)
        stored = resolve_log_options(identifier, table_schema.options, table_schema.primary_keys)
        log_options = log_store_options(TableOptions(stored), table_schema.has_primary_key)
        if log_options is not None:
            check_format_options(identifier, log_options, schema, table_schema.primary_keys)
        check_merge_options(identifier, schema, table_schema.primary_keys, TableOptions(stored))
        check_partition_expire_options(identifier, table_schema.partition_keys, TableOptions(stored))
        table_schema = TableSchema(0, schema, table_schema.primary_keys, table_schema.partition_keys, stored,
                                   comment=comment)
        path = self._table_path(db, name)
        if not SchemaManager(self.io, TablePaths(path)).create(table_schema):
            if ignore_if_exists:
                return self.get_table(identifier)
            raise TableAlreadyExistsError(f"table {identifier!r} already exists")
        if log_options is not None:
            try:
                LogStore(log_options, schema, table_schema.primary_keys).create_topic()
            except LogStoreError:
                self.io.delete_dir(path)  # the table is not created without its topic
                raise
        log.info("created table %s at %s", identifier, path)
        return self.get_table(identifier)

    def _validate_schema(
        self,
        identifier: str,
        schema: pa.Schema,
        primary_key: Sequence[str],
        partition_by: Sequence[str],
        options: Mapping[str, str],
    ) -> TableSchema:
        if not isinstance(schema, pa.Schema) or len(schema) == 0:
            raise InvalidTableError(f"table {identifier!r}: schema must be a non-empty pyarrow.Schema")
        names = schema.names
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InvalidTableError(f"table {identifier!r}: duplicate columns {dup}")
        reserved = [n for n in names if n in RESERVED_COLUMNS]
        if reserved:
            raise InvalidTableError(f"table {identifier!r}: column names {reserved} are reserved")
        for what, cols in (("primary-key", primary_key), ("partition", partition_by)):
            missing = [c for c in cols if c not in names]
            if missing:
                raise InvalidTableError(f"table {identifier!r}: {what} columns {missing} are not in the schema {names}")
            if len(set(cols)) != len(cols):
                raise InvalidTableError(f"table {identifier!r}: {what} columns {list(cols)} repeat a column")
        nullable = [c for c in primary_key if schema.field(c).nullable]
        if nullable:
            raise InvalidTableError(
                f"table {identifier!r}: primary-key columns {nullable} must be non-nullable "
                f"(declare them as pa.field(name, type, nullable=False))"
            )
        for c in primary_key:
            try:
                if pa.types.is_float16(schema.field(c).type):  # Arrow has no sort or compare kernels for it
                    raise KeyCodecError("float16 cannot be compared")
                KeyCodec([schema.field(c).type])
            except KeyCodecError:
                raise InvalidTableError(
                    f"table {identifier!r}: primary-key column {c!r} has type {schema.field(c).type}, which has no "
                    f"order and cannot be a key (list, struct, map, dictionary, null and float16 types cannot); use a "
                    f"string, binary, number, decimal, boolean, date or time column"
                ) from None
        for c in partition_by:
            check_name(c, "partition column")
        if primary_key and partition_by and not set(partition_by) <= set(primary_key):
            raise InvalidTableError(
                f"table {identifier!r}: partition columns {list(partition_by)} must be part of the primary key "
                f"{list(primary_key)} (a key cannot move between partitions)"
            )
        bad = [c for c in partition_by if not any(check(schema.field(c).type) for check in _PARTITION_TYPES)]
        if bad:
            raise InvalidTableError(
                f"table {identifier!r}: partition columns {bad} must be string, integer, date or boolean"
            )
        return TableSchema(0, schema, tuple(primary_key), tuple(partition_by), dict(options))

    def get_table(self, identifier: str) -> CatalogTable:
        db, name = parse_identifier(identifier)
        path = self._table_path(db, name)
        manager = SchemaManager(self.io, TablePaths(path))
        ids = manager.schema_ids()   # one listing says both whether the table exists and its latest schema
        if not ids or ids[0] != 0:
            raise TableNotFoundError(f"table {identifier!r} does not exist in {self.warehouse}")
        schema = manager.get(ids[-1])
        options = TableOptions(dict(schema.options))
        try:
            store_options = options.to_filestore()
        except InvalidOptionError as e:
            raise InvalidOptionError(f"table {identifier!r}: {e}") from None
        store = FileStore(self.io, path, schema, store_options, identifier)
        log_options = log_store_options(options, schema.has_primary_key)
        log_store = None if log_options is None else LogStore(log_options, schema.arrow_schema, schema.primary_keys,
                                                              history=_SchemaHistory(self.io, path))
        return CatalogTable(identifier, path, schema, options, store, log_store)

    def alter_table_options(self, identifier: str, set_options: Mapping[str, str] | None = None,
                            unset_options: Sequence[str] = ()) -> CatalogTable:
        """Set and reset table options (only those `options.ALTERABLE` names) by publishing the next schema
        (exclusive create: a concurrent change makes this one retry on top of it)."""
        for _ in range(10):
            table = self.get_table(identifier)
            changed = alter_options(identifier, table.schema.options, set_options or {}, unset_options)
            check_partition_expire_options(identifier, table.schema.partition_keys, TableOptions(changed))
            new = dataclasses.replace(table.schema, id=table.schema.id + 1, options=changed, time_millis=0)
            if SchemaManager(self.io, TablePaths(table.path)).create(new):
                log.info("altered options of table %s (schema %d)", identifier, new.id)
                return self.get_table(identifier)
        raise InvalidTableError(f"table {identifier!r}: options changed concurrently too often; retry")

    def alter_table(self, identifier: str, *, add_columns: Sequence[pa.Field] = (),
                    alter_column_types: Mapping[str, pa.DataType] = {}) -> CatalogTable:
        """Evolve the table's schema: add nullable columns at the end, widen column types (catalog/evolution.py
        has the rules; a refused change is a SchemaEvolutionError naming the table, the column and both types).
        Publishes ONE next schema holding every change (exclusive create: a concurrent schema change makes this
        one retry on top of it); changes that change nothing (e.g. a column added again with its type) publish
        nothing. Files written before read under the new schema (filestore.evolution); the returned table, and
        every table loaded from now on, writes and logs the new columns."""
        def change(table: CatalogTable) -> TableSchema | None:
            new = evolve_schema(identifier, table.schema, add_columns, alter_column_types, RESERVED_COLUMNS)
            if new is not None:
                check_added_columns(identifier, table.options, [f.name for f in new.arrow_schema
                                                                if f.name not in table.schema.arrow_schema.names])
            return new
        return self._evolve(identifier, change)

    def rename_column(self, identifier: str, old: str, new: str) -> CatalogTable:
        """Rename column `old` to `new` (ALTER TABLE ... RENAME COLUMN): it keeps its id, so rows written before
        read their values under the new name (filestore.evolution). Never a primary-key, partition or bucket-key
        column, nor one the table's options name; `new` must not be a column (it may be a dropped column's name).
        A refused change is a SchemaEvolutionError naming the table and the column; nothing is published."""
        return self._evolve(identifier, lambda t: rename_column(identifier, t.schema, old, new, RESERVED_COLUMNS,
                                                                _referenced(t.options)))

    def drop_column(self, identifier: str, *names: str) -> CatalogTable:
        """Drop columns `names` (ALTER TABLE ... DROP COLUMN / DROP COLUMNS) in one schema change: they leave
        the schema and their data is never read again, even by a column added later under the same name (a new id).
        Never a primary-key, partition or bucket-key column, nor one the table's options name, nor any column of a
        table without a primary key; a refused change is a SchemaEvolutionError and publishes nothing."""
        return self._evolve(identifier, lambda t: drop_columns(identifier, t.schema, names, _referenced(t.options)))

    def _evolve(self, identifier: str, change: Callable[[CatalogTable], TableSchema | None]) -> CatalogTable:
        """Publish `change(table)` as the table's next schema (None: no change), once its log formats are checked
        to carry it; a concurrent schema change makes this one retry on top of it (exclusive create)."""
        for _ in range(10):
            table = self.get_table(identifier)
            new = change(table)
            if new is None:
                return table
            log_options = log_store_options(table.options, new.has_primary_key)
            if log_options is not None:  # the log's formats must encode the new schema
                try:
                    check_format_options(identifier, log_options, new.arrow_schema, new.primary_keys)
                except InvalidOptionError as e:
                    changed = [f.name for f in new.arrow_schema if f not in table.schema.arrow_schema]
                    raise SchemaEvolutionError(
                        f"{e} (log.format {log_options.format} cannot carry the changed columns {changed})",
                        table=identifier, column=", ".join(changed)) from None
            if SchemaManager(self.io, TablePaths(table.path)).create(new):
                log.info("evolved the schema of table %s (schema %d)", identifier, new.id)
                return self.get_table(identifier)
        raise InvalidTableError(f"table {identifier!r}: the schema changed concurrently too often; retry")

    def rename_table(self, identifier: str, new_identifier: str) -> None:
        """The table under a new name, in its database or another one (ALTER TABLE ... RENAME TO): its files move
        with it (`FileIO.move_dir`: one rename on a file system; on an object store a copy, schema last, then the
        old files removed, schema first). Its Kafka topic keeps its name (`log.topic`): the log and its readers go
        on. A writer still holding the old name fails at its next commit; nothing committed is lost."""
        db, name = parse_identifier(identifier)
        new_db, new_name = parse_identifier(new_identifier)
        if not self.table_exists(identifier):
            raise TableNotFoundError(f"table {identifier!r} does not exist in {self.warehouse} (renaming it to "
                                     f"{new_identifier!r})")
        if not self.database_exists(new_db):
            raise DatabaseNotFoundError(f"database {new_db!r} does not exist (renaming table {identifier!r} to "
                                        f"{new_identifier!r})")
        target = self._table_path(new_db, new_name)
        if self.table_exists(new_identifier) or self.io.exists(target):
            raise TableAlreadyExistsError(f"table {new_identifier!r} already exists (renaming {identifier!r})")
        schema_dir = TablePaths(self._table_path(db, name)).schema_dir
        self.io.move_dir(self._table_path(db, name), target, last=lambda path: path.startswith(schema_dir + "/"))
        log.info("renamed table %s to %s", identifier, new_identifier)

    def drop_table(self, identifier: str, ignore_if_not_exists: bool = False) -> None:
        if not self.table_exists(identifier):
            if ignore_if_not_exists:
                return
            raise TableNotFoundError(f"table {identifier!r} does not exist in {self.warehouse}")
        table = self.get_table(identifier)
        if table.log is not None:
            table.log.drop_topic()  # a broker that is down fails the drop: nothing is removed
        self.io.delete_dir(table.path)
        path = table.path
        log.info("dropped table %s and removed %s", identifier, path)
