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
    SchemaEvolutionError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from catalog.options import (
    ALL_OPTIONS,
    CHANGE_TRACKING,
    INGEST_SCHEMA_EVOLUTION,
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
    "CHANGE_TRACKING",
    "Catalog",
    "CatalogError",
    "CatalogTable",
    "DatabaseAlreadyExistsError",
    "DatabaseNotEmptyError",
    "DatabaseNotFoundError",
    "INGEST_SCHEMA_EVOLUTION",
    "InvalidIdentifierError",
    "InvalidOptionError",
    "InvalidTableError",
    "SESSION_PREFIX",
    "SINK_UPSERT_MATERIALIZE",
    "SchemaEvolutionError",
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
