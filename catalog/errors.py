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
