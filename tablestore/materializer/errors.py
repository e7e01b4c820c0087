"""Errors raised by the upsert materializer and the changelog normalizer.

Every error carries the value it is about (the option key, the row kind, the row or the column) so the message
can name it. A retraction that finds nothing to retract is NOT an error: it is counted and logged ("state cleared").
"""
from __future__ import annotations

from tablestore.errors import InvalidRowKindError, TableStoreError

__all__ = ["CorruptStateError", "InvalidOptionError", "InvalidRowKindError", "MaterializerError", "RowShapeError"]


class MaterializerError(TableStoreError):
    """Root of every error raised by ``tablestore.materializer``."""


class InvalidOptionError(MaterializerError):
    """An option value is malformed or out of range (names the option key and the value)."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"invalid value {value!r} for option {key!r}: {reason}")
        self.key = key
        self.value = value


class RowShapeError(MaterializerError):
    """A row does not fit the declared or inferred row shape (arity, key positions, column types)."""

    def __init__(self, row: object, reason: str) -> None:
        super().__init__(f"row {row!r}: {reason}")
        self.row = row


class CorruptStateError(MaterializerError):
    """Stored state could not be read back (unknown layout version, damaged blob); names the key concerned."""

    def __init__(self, key: bytes, reason: str) -> None:
        super().__init__(f"corrupt materializer state for key {key.hex()}: {reason}")
        self.key = key
