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
from catalog.options import (
    ALL_OPTIONS,
    CHANGE_TRACKING,
    CHANGELOG_NORMALIZE,
    SESSION_PREFIX,
    SINK_UPSERT_MATERIALIZE,
    UPSERT_MATERIALIZE_STRATEGY,
    UPSERT_MATERIALIZE_THRESHOLD_HIGH,
    UPSERT_MATERIALIZE_THRESHOLD_LOW,
    UPSERT_MATERIALIZE_TTL,
    TableOptions,
)
from catalog.optiontypes import parse_duration

__all__ = [
    "ALL_OPTIONS",
    "CHANGELOG_NORMALIZE",
    "CHANGE_TRACKING",
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
    "SINK_UPSERT_MATERIALIZE",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "TableOptions",
    "UPSERT_MATERIALIZE_STRATEGY",
    "UPSERT_MATERIALIZE_THRESHOLD_HIGH",
    "UPSERT_MATERIALIZE_THRESHOLD_LOW",
    "UPSERT_MATERIALIZE_TTL",
    "parse_duration",
    "parse_identifier",
]
