"""The change kinds on the wire: the one owner of +I / -U / +U / -D.

Invariant (on the wire, never rename): the enum values are the short strings Flink prints and the
`_row_kind` column of every Arrow batch the log store reads or writes holds exactly these strings.
The file store has its own value kinds; the translation happens in `tablestore/` only.
"""
from __future__ import annotations

import enum

__all__ = ["RowKind", "ROW_KIND_COLUMN", "ADDITIONS", "RETRACTIONS"]

ROW_KIND_COLUMN = "_row_kind"  # on-disk / on-wire column name


class RowKind(str, enum.Enum):
    """One change of a changelog, as Flink's RowKind (short-string form)."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"

    @property
    def is_addition(self) -> bool:
        """True for +I and +U (the row is in the table after the change)."""
        return self in ADDITIONS

    def __str__(self) -> str:
        return self.value


ADDITIONS = frozenset({RowKind.INSERT, RowKind.UPDATE_AFTER})
RETRACTIONS = frozenset({RowKind.UPDATE_BEFORE, RowKind.DELETE})
