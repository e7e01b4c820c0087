"""The closed set of errors the catalog raises; each names the database, table or option concerned."""
from __future__ import annotations


class CatalogError(Exception):
    """Root of every error the catalog raises."""


class InvalidIdentifierError(CatalogError):
    """A database or table name is empty, has '/', '\\' or '..', or would escape the warehouse."""


class DatabaseNotFoundError(CatalogError):
    pass


class DatabaseAlreadyExistsError(CatalogError):
    pass


class DatabaseNotEmptyError(CatalogError):
    pass


class TableNotFoundError(CatalogError):
    pass


class TableAlreadyExistsError(CatalogError):
    pass


class InvalidTableError(CatalogError):
    """A table definition breaks a rule: primary key, partitioning, schema."""


class InvalidOptionError(CatalogError):
    """An option key is unknown or its value does not parse; names the key and lists what is valid."""


class SchemaEvolutionError(InvalidTableError):
    """A schema change `Catalog.alter_table`, `rename_column` or `drop_column` refuses (a column that is not
    nullable, a name in use, a type that does not widen, a key or partition column's type, a rename or drop of a key,
    partition or bucket-key column); names the table, the column and both types."""

    def __init__(self, message: str, *, table: str, column: str, old_type: str | None = None,
                 new_type: str | None = None) -> None:
        super().__init__(message)
        self.table = table
        self.column = column
        self.old_type = old_type
        self.new_type = new_type

    def __reduce__(self) -> tuple[object, ...]:
        return (_schema_evolution_error, (str(self), self.table, self.column, self.old_type, self.new_type))


def _schema_evolution_error(message: str, table: str, column: str, old_type: str | None,
                            new_type: str | None) -> SchemaEvolutionError:
    return SchemaEvolutionError(message, table=table, column=column, old_type=old_type, new_type=new_type)


class MergeEngineOptionError(InvalidOptionError):
    """A table's merge-engine options (`merge-engine`, `sequence.field`, `fields.<column>.aggregate-function`) do
    not fit its schema: names the table, the option and the column concerned."""

    def __init__(self, message: str, *, table: str, option: str, column: str | None = None) -> None:
        super().__init__(message)
        self.table = table
        self.option = option
        self.column = column

    def __reduce__(self) -> tuple[object, ...]:
        return (_merge_engine_option_error, (str(self), self.table, self.option, self.column))


def _merge_engine_option_error(message: str, table: str, option: str, column: str | None) -> MergeEngineOptionError:
    return MergeEngineOptionError(message, table=table, option=option, column=column)
