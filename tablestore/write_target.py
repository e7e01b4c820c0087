"""`WriteTarget`: what a write session (tablestore.writer.TableWriter) needs of its table, and the one place every
front door decides whether its writes go to the table's log (`change-tracking`)."""
from __future__ import annotations

from dataclasses import dataclass

import logstore
from catalog import CHANGE_TRACKING, CatalogTable
from filestore import FileStore


@dataclass(frozen=True)
class WriteTarget:
    """What a write session needs of its table, as values: its name, file store and log store (None: no log), and
    whether its writes go to the log (`change-tracking`)."""

    name: str
    store: FileStore
    log: logstore.LogStore | None
    change_tracking: bool = True

    @classmethod
    def of(cls, table: CatalogTable, change_tracking: bool | None = None) -> "WriteTarget":
        """The write target of a loaded table: the one place every front door (the table API, Spark's batch and
        streaming writes, SQL, ingest) decides `change-tracking`: a write's own `change_tracking`, else the table
        option."""
        tracked = table.options.get(CHANGE_TRACKING) if change_tracking is None else change_tracking
        return cls(table.identifier, table.store, table.log, tracked)

    @property
    def tracked_log(self) -> logstore.LogStore | None:
        """The log this session's writes go to: None without a log or with change-tracking off."""
        return self.log if self.change_tracking else None
