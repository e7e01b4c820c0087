"""The `managed` data source's options as values: the table a read or write names (`TableRef`, `table_ref`), the
option helpers and the option error. A leaf of tablestore.spark: the data source's entry points (datasource.py) and
every reader and writer import it, never the other way round (see datasource.py for the options themselves)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from catalog import is_catalog_option
from tablestore.errors import TableStoreError

if TYPE_CHECKING:
    from catalog import CatalogTable
    from tablestore.table import Table

NAME = "managed"
WAREHOUSE_ENV = "TABLESTORE_WAREHOUSE"
_SESSION_PREFIX = "table-storage."


class DataSourceOptionError(TableStoreError):
    """An option of a `managed` read or write is missing or invalid; names the option."""


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
