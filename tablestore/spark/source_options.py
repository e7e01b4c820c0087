"""The `managed` data source's options as values: the options a read, write or stream accepts (`OPTIONS`, declared
once, checked by `check_options`), the table a read or write names (`TableRef`, `table_ref`), the option helpers
and the option error. A leaf of tablestore.spark: the data source's entry points (datasource.py) and every reader
and writer import it, never the other way round.

An option no entry of `OPTIONS` accepts is an error naming the option and the table, with the "did you mean" of
the table options (catalog.options): `.option("snapshot-idd", "1")` must not read the latest snapshot silently.
Spark's keys are case-insensitive and reach the source lowercased: keys are compared lowercased.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Mapping

from catalog import ALL_OPTIONS, is_catalog_option
from tablestore.errors import TableStoreError

if TYPE_CHECKING:
    from catalog import CatalogTable
    from tablestore.table import Table

NAME = "managed"
WAREHOUSE_ENV = "TABLESTORE_WAREHOUSE"
_SESSION_PREFIX = "table-storage."


class DataSourceOptionError(TableStoreError):
    """An option of a `managed` read or write is missing, unknown or invalid; names the option and the table."""


Use = Literal["read", "write", "stream-read", "stream-write"]
READS: tuple[Use, ...] = ("read", "stream-read")
WRITES: tuple[Use, ...] = ("write", "stream-write")
EVERY: tuple[Use, ...] = (*READS, *WRITES)


@dataclass(frozen=True)
class SourceOption:
    """An option of `format("managed")`: its key (lowercase, as Spark hands it over), where it applies and what it
    does. `prefix`: every key starting with `key` (a family of options); `catalog`: the catalog's own options
    (catalog.is_catalog_option, whose prefix `key` shows)."""

    key: str
    uses: tuple[Use, ...]
    doc: str
    prefix: bool = False
    catalog: bool = False

    def accepts(self, key: str, use: Use) -> bool:
        if use not in self.uses:
            return False
        if self.catalog:
            return is_catalog_option(key)
        return key.startswith(self.key) if self.prefix else key == self.key


OPTIONS: tuple[SourceOption, ...] = (
    SourceOption("path", EVERY, "the table identifier: load('db.t') / save('db.t') / start('db.t')"),
    SourceOption("paths", EVERY, "Spark's list of paths (load('db.t') passes it too)"),
    SourceOption("table", EVERY, "the table identifier, when no path is given"),
    SourceOption("warehouse", EVERY, "where the catalog lives (default: $TABLESTORE_WAREHOUSE)"),
    SourceOption("table-storage.", EVERY, "catalog session options (docs/options.md)", prefix=True),
    SourceOption("s3.", EVERY, "the catalog's options (docs/options.md#catalog-options)", catalog=True),
    SourceOption("__", EVERY, "internal: set by the tablestore JVM classes, never by users", prefix=True),
    SourceOption("snapshot-id", ("read",), "time travel: read this snapshot"),
    SourceOption("timestamp-ms", ("read",), "time travel: read the last snapshot at or before this time (epoch ms)"),
    SourceOption("scan", ("stream-read",), "where a stream of changes starts: full, latest or from-timestamp"),
    SourceOption("scan.timestamp-ms", ("stream-read",), "the start of scan 'from-timestamp' (epoch ms)"),
    SourceOption("max-rows-per-trigger", ("stream-read",), "at most about this many rows per micro-batch"),
    SourceOption("changelog.normalize", ("stream-read",), "the changelog of the commits (true) or the log as stored"),
    SourceOption("consumer-id", ("stream-read",), "record the stream's progress in the table under this id (expiry "
                 "keeps what it needs); a query without checkpointed offsets resumes where it stopped"),
    SourceOption("overwrite-mode", WRITES, "static, dynamic or filter: what an overwrite replaces"),
    SourceOption("overwrite-predicate", WRITES, "overwrite-mode filter: Spark's predicate as JSON"),
    SourceOption("change-tracking", WRITES, "whether the write goes to the table's log too (default: the table's)"),
    SourceOption("jvm-writer", ("write",), "false keeps a batch write on the Python writer"),
    SourceOption("sink.shuffle-by-bucket", ("write",),
                 "false: this batch write is not shuffled by bucket (default: the table's option)"),
    SourceOption("txnappid", ("write",), "an idempotent write's application id (Delta's txnAppId; with txnVersion)"),
    SourceOption("txnversion", ("write",), "an idempotent write's version: a version of the application id already "
                 "committed is skipped (a foreachBatch batch that Spark runs again commits once)"),
    SourceOption("checkpointlocation", ("stream-write", "stream-read"), "Spark's: the streaming query's checkpoint"),
    SourceOption("queryname", ("stream-write", "stream-read"), "Spark's: the streaming query's name (queryName(...))"),
)
"""Every option `format("managed")` accepts: the one list (docs/spark.md#options shows it)."""


def check_options(options: Mapping[str, str], *uses: Use) -> None:
    """Refuse an option no entry of OPTIONS accepts for any of `uses`: DataSourceOptionError naming it and the
    table, with the closest accepted key ("did you mean"), as an unknown table option is refused."""
    keys = {str(k).lower(): str(v) for k, v in dict(options).items()}
    table = keys.get("path") or keys.get("table") or "?"
    for key in sorted(keys):
        if any(o.accepts(key, use) for o in OPTIONS for use in uses):
            continue
        mine = [o for o in OPTIONS if set(uses) & set(o.uses)]
        exact = [o for o in OPTIONS if not (o.prefix or o.catalog)]
        valid = [o.key + ("*" if o.prefix or o.catalog else "") for o in mine if o.key != "__"]
        close = difflib.get_close_matches(key, [o.key for o in exact if o in mine], n=1)
        elsewhere = [o.uses for o in exact if o.key == key]
        table_option = difflib.get_close_matches(key, [o.key for o in ALL_OPTIONS], n=1)
        hint = (f" ({_elsewhere(elsewhere[0])})" if elsewhere
                else f" (did you mean {close[0]!r}?)" if close
                else f" (did you mean the table option {table_option[0]!r}? table options are set when the table "
                     "is created or altered, not per read or write)" if table_option else "")
        what = "" if set(uses) == set(EVERY) else " or ".join(uses) + " "
        raise DataSourceOptionError(f"table {table!r}: unknown {what}option {key!r}{hint}; valid options: "
                                    f"{', '.join(valid)}")


_USE_NAMES: dict[Use, str] = {"read": "batch reads", "write": "batch writes", "stream-read": "streaming reads",
                              "stream-write": "streaming writes"}


def _elsewhere(uses: tuple[Use, ...]) -> str:
    """What an option of other uses than the one at hand is: "it is a write option: only batch writes and streaming
    writes take it"."""
    streams: tuple[Use, ...] = ("stream-read", "stream-write")
    kinds = (("a write option", WRITES), ("a read option", READS), ("a streaming option", streams))
    kind = next((k for k, of in kinds if set(uses) <= set(of)), "an option")
    return f"it is {kind}: only {' and '.join(_USE_NAMES[u] for u in uses)} take it"


@dataclass(frozen=True)
class TableRef:
    """Everything a worker needs to open the table again: plain values, so it pickles to executors."""

    warehouse: str
    identifier: str
    catalog_options: tuple[tuple[str, str], ...] = ()

    def open(self) -> "Table":
        from tablestore.table import Table

        return Table(self.handle())

    def handle(self) -> "CatalogTable":
        """The catalog's handle: schema, options, file store and log store of the table."""
        import catalog

        return catalog.Catalog(self.warehouse, dict(self.catalog_options)).get_table(self.identifier)


def table_ref(options: Mapping[str, str]) -> TableRef:
    opts = {str(k).lower(): str(v) for k, v in dict(options).items()}
    identifier = opts.get("path") or opts.get("table")
    if not identifier:
        raise DataSourceOptionError("a managed read or write needs a table: load('db.table') / save('db.table')")
    warehouse = opts.get("warehouse") or os.environ.get(WAREHOUSE_ENV)
    if not warehouse:
        raise DataSourceOptionError(
            f"table {identifier!r}: no warehouse: give .option('warehouse', ...) or start the session with "
            f"tablestore.spark.session(warehouse=...) (environment variable {WAREHOUSE_ENV})")
    catalog_options = tuple(sorted((k, v) for k, v in opts.items()
                                   if k.startswith(_SESSION_PREFIX) or is_catalog_option(k)))
    return TableRef(warehouse, identifier, catalog_options)


def int_option(options: Mapping[str, str], key: str, table: str) -> int | None:
    value = dict(options).get(key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise DataSourceOptionError(f"table {table!r}: option {key!r} must be an integer, got {value!r}") from None


CHANGES_OPTION = "__read-changes"
"""Set by the JVM provider (tablestore/spark/java/.../jvm/provider/ManagedProvider.java, the same constant) when
Spark asks for the schema of a streaming read: `schema()` then answers `_row_kind` + the table's columns."""
