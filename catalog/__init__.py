"""The catalog: databases and managed tables over a warehouse, with their typed options."""
from catalog.catalog import Catalog, CatalogTable, parse_identifier
from catalog.errors import (
    CatalogError,
    DatabaseAlreadyExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    InvalidIdentifierError,
    InvalidOptionError,
    InvalidTableError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from catalog.options import ALL_OPTIONS, SESSION_PREFIX, TableOptions

__all__ = [
    "ALL_OPTIONS",
    "Catalog",
    "CatalogError",
    "CatalogTable",
    "DatabaseAlreadyExistsError",
    "DatabaseNotEmptyError",
    "DatabaseNotFoundError",
    "InvalidIdentifierError",
    "InvalidOptionError",
    "InvalidTableError",
    "SESSION_PREFIX",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "TableOptions",
    "parse_identifier",
]
