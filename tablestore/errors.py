"""The closed set of errors the user-facing ``tablestore`` package raises."""
from __future__ import annotations


class TableStoreError(Exception):
    """Root of every error raised by ``tablestore`` and its subpackages."""


class InvalidRowKindError(TableStoreError):
    """A change carries a row kind other than +I, -U, +U, -D; names the kinds (and the table, when known)."""

    def __init__(self, kind: object, table: str | None = None) -> None:
        where = f"table {table!r}: " if table else ""
        super().__init__(f"{where}invalid row kind {kind!r}: expected one of '+I', '-U', '+U', '-D'")
        self.kind = kind
        self.table = table
