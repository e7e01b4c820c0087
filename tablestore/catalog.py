"""`tablestore.Catalog`: the catalog of managed tables, handing out `Table` objects."""
from __future__ import annotations

from typing import Mapping, Sequence

import pyarrow as pa

import catalog as _catalog
from tablestore.table import Table


class Catalog:
    """Databases and managed tables under a warehouse (a local path or any fsspec URL).

    `options` are session-level defaults for new tables, with the `table-storage.` prefix
    (e.g. {"table-storage.bucket": "2"}); per-table options passed to `create_table` win over them.
    """

    def __init__(self, warehouse: str, options: Mapping[str, str] | None = None) -> None:
        self._catalog = _catalog.Catalog(warehouse, options)

    @property
    def warehouse(self) -> str:
        return self._catalog.warehouse

    def create_database(self, name: str, ignore_if_exists: bool = False,
                        properties: Mapping[str, str] | None = None) -> None:
        self._catalog.create_database(name, ignore_if_exists, properties)

    def list_databases(self) -> list[str]:
        return self._catalog.list_databases()

    def database_exists(self, name: str) -> bool:
        return self._catalog.database_exists(name)

    def drop_database(self, name: str, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        self._catalog.drop_database(name, ignore_if_not_exists, cascade)

    def create_table(
        self,
        identifier: str,
        schema: pa.Schema,
        primary_key: Sequence[str] | None = None,
        partition_by: Sequence[str] | None = None,
        options: Mapping[str, str] | None = None,
        ignore_if_exists: bool = False,
        comment: str | None = None,
    ) -> Table:
        handle = self._catalog.create_table(
            identifier, schema, primary_key, partition_by, options, ignore_if_exists, comment
        )
        return Table(handle, catalog=self._catalog)

    def get_table(self, identifier: str) -> Table:
        return Table(self._catalog.get_table(identifier), catalog=self._catalog)

    def table_exists(self, identifier: str) -> bool:
        return self._catalog.table_exists(identifier)

    def list_tables(self, database: str) -> list[str]:
        return self._catalog.list_tables(database)

    def alter_table_options(self, identifier: str, set_options: Mapping[str, str] | None = None,
                            unset_options: Sequence[str] = ()) -> Table:
        """Change options of an existing table (`catalog.options.ALTERABLE` lists those that may change; the
        others are fixed at creation), as ALTER TABLE ... SET / UNSET TBLPROPERTIES does in Spark SQL."""
        return Table(self._catalog.alter_table_options(identifier, set_options, unset_options), catalog=self._catalog)

    def alter_table(self, identifier: str, *, add_columns: Sequence[pa.Field] = (),
                    alter_column_types: Mapping[str, pa.DataType] = {}) -> Table:
        """Evolve a table's schema in one change: add nullable columns at the end (`add_columns`), widen column
        types (`alter_column_types`: int8 -> int16 -> int32 -> int64, float32 -> float64, decimal(p, s) ->
        decimal(p', s) with p' > p). Rows written before read the added columns as null and widened ones cast.
        Re-adding a column with its type is no change; any refused change (a column that is not nullable, a name in
        use with another type, a narrowing, a key or partition column's type) is a SchemaEvolutionError naming the
        table, the column and both types. Spark SQL's ALTER TABLE ... ADD COLUMNS / ALTER COLUMN ... TYPE does
        the same."""
        return Table(self._catalog.alter_table(identifier, add_columns=add_columns,
                                               alter_column_types=alter_column_types), catalog=self._catalog)

    def rename_column(self, identifier: str, old: str, new: str) -> Table:
        """Rename column `old` to `new` (Spark SQL: ALTER TABLE ... RENAME COLUMN old TO new): rows written before
        read their values under the new name; returns the table as changed. Never a primary-key, partition or
        bucket-key column (the key codec, bucket hash and paths depend on them), nor a column the table's options
        name; `new` must be a free name (a dropped column's is: that column is gone for good). A refused change is a
        SchemaEvolutionError naming the table and the column, and publishes nothing."""
        return Table(self._catalog.rename_column(identifier, old, new), catalog=self._catalog)

    def drop_column(self, identifier: str, *names: str) -> Table:
        """Drop columns `names` in one change (Spark SQL: ALTER TABLE ... DROP COLUMN c / DROP COLUMNS (c, d));
        returns the table as changed. Their data is never read again: a column added later under the same name
        is another column and reads null in the rows written before it. Never a primary-key, partition or
        bucket-key column, nor a column the table's options name, nor any column of a table without a primary key
        (its whole row is its key); refused: a SchemaEvolutionError, nothing published."""
        return Table(self._catalog.drop_column(identifier, *names), catalog=self._catalog)

    def rename_table(self, identifier: str, new_identifier: str) -> None:
        """Rename a table, within its database or into another ('db.t' -> 'db2.u'), as Spark SQL's and Paimon's
        ALTER TABLE ... RENAME TO: its files and snapshots move with it (on an object store, a copy then a delete:
        neither name shows a partial table meanwhile); its Kafka topic keeps its name, so its log and readers carry
        on. TableNotFoundError, TableAlreadyExistsError or DatabaseNotFoundError otherwise."""
        self._catalog.rename_table(identifier, new_identifier)

    def drop_table(self, identifier: str, ignore_if_not_exists: bool = False) -> None:
        self._catalog.drop_table(identifier, ignore_if_not_exists)
