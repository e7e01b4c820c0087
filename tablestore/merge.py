"""`Table.merge(source)`: MERGE INTO from the Python API, in the builder style of Delta Lake's Python APIs
(delta-rs `DeltaTable.merge`, Delta Spark's `DeltaMergeBuilder`):

    (table.merge(source)                                   # rows matched on the table's primary key
          .when_matched_delete(pc.field("s.op") == "d")
          .when_matched_update_all()
          .when_not_matched_insert_all()
          .when_not_matched_by_source_delete(pc.field("t.dt") < "2024-01-01")
          .execute())                                      # -> MergeResult; one snapshot

The semantics are SQL MERGE INTO's through the managed catalog (catalog/RowLevelRewrite.java, docs/spark_sql.md):
primary-key tables of merge-engine deduplicate without a sequence.field; the ON condition is the primary key; each
source row takes the first WHEN MATCHED (a target row has its key) or WHEN NOT MATCHED clause whose predicate
holds, each unmatched target row the first WHEN NOT MATCHED BY SOURCE clause; no clause, no change. The builder is
immutable: each `when_...` returns a new one.

Protocol of `execute()`:
1. The latest snapshot S is pinned and the target's rows read there (with no BY SOURCE clause only the rows of the
   source's key values: a key filter, which also prunes partitions and files).
2. The changes are planned (tablestore/merge_plan.py, vectorised): `-U` old / `+U` new per updated row, `-D` old per
   deleted row, `+I` per inserted row; a target row matched by two source rows is a MergeError naming its key.
3. The changes are written by the table's write session and committed as one snapshot planned on S (`planned_on`,
   filestore/commit.py step 4): if a data commit since S touched a (partition, bucket) the merge writes, the commit
   fails with ConcurrentUpdateError and nothing is committed (its files are deleted, the log transaction aborted);
   running the merge again reads the latest snapshot. The table's log gets the changelog as written.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from filestore import ConcurrentUpdateError
from tablestore.convert import Data, to_arrow
from tablestore.merge_plan import Clause, MergeError, MergeTarget, conform_source, plan_changes
from tablestore.writer import TableWriter

__all__ = ["MergeError", "MergeResult", "TableMerger"]


@dataclass(frozen=True)
class MergeResult:
    """What `TableMerger.execute()` did: the snapshot it committed (None: no change) and the rows it changed."""

    snapshot_id: int | None
    num_source_rows: int
    num_target_rows_updated: int
    num_target_rows_deleted: int
    num_target_rows_inserted: int


@dataclass(frozen=True)
class MergeIo:
    """What a merge needs of its table besides values: its reads, its latest snapshot and its write session."""

    read: Callable[..., pa.Table]
    latest_snapshot_id: Callable[[], int | None]
    session: Callable[[], TableWriter]


Values = Mapping[str, object]
"""Column -> value of an update or insert: a pyarrow compute expression over the joined row's fields
(`pc.field("s.amount") * 2`), a string naming such a field ("s.amount"), or a literal (None, 3, pc.scalar("x"))."""


@dataclass(frozen=True)
class TableMerger:
    """A MERGE being built (`Table.merge`); `execute()` runs it. Predicates and values see the joined row's fields
    `<target_alias>.<column>` (the target row; null when unmatched) and `<source_alias>.<column>`."""

    target: MergeTarget
    io: MergeIo = field(repr=False)
    source: pa.Table = field(repr=False)
    source_alias: str = "s"
    target_alias: str = "t"
    clauses: tuple[Clause, ...] = ()

    @staticmethod
    def start(target: MergeTarget, io: MergeIo, source: Data, *, engine: str, source_alias: str,
              target_alias: str) -> "TableMerger":
        """The merge of `source` into `target` (refused unless the table has a primary key and merge-engine
        deduplicate without a sequence.field, as SQL MERGE INTO; `engine` describes the table's)."""
        if not target.primary_key:
            raise MergeError(f"MERGE INTO {target.name}: it has no primary key: a merge applies its changes by key. "
                             "On a table without one, delete() and write() change rows")
        if engine != "deduplicate":
            raise MergeError(f"MERGE INTO {target.name}: its merge-engine is {engine}: a merge writes each changed "
                             "row's old row (-U, -D) before its new one, which only merge-engine deduplicate without "
                             "a sequence.field applies as a replacement; write the new rows with write() instead")
        if not source_alias or not target_alias or source_alias == target_alias:
            raise MergeError(f"MERGE INTO {target.name}: the source and target aliases must be two different names, "
                             f"not {source_alias!r} and {target_alias!r}")
        return TableMerger(target, io, to_arrow(source), source_alias, target_alias)

    def _with(self, clause: Clause) -> "TableMerger":
        return replace(self, clauses=self.clauses + (clause,))

    @staticmethod
    def _values(values: Values) -> tuple[tuple[str, object], ...]:
        return tuple(dict(values).items())

    # -- WHEN MATCHED: a target row has the source row's key ------------------------------------------------
    def when_matched_update(self, updates: Values, predicate: pc.Expression | None = None) -> "TableMerger":
        """Set the columns of `updates` (the others keep their value); never a primary-key column."""
        return self._with(Clause("matched", "update", predicate, self._values(updates)))

    def when_matched_update_all(self, predicate: pc.Expression | None = None, *,
                                except_cols: Sequence[str] = ()) -> "TableMerger":
        """Set every column to the source's column of its name (`UPDATE SET *`), but `except_cols`."""
        return self._with(Clause("matched", "update", predicate, None, tuple(except_cols)))

    def when_matched_delete(self, predicate: pc.Expression | None = None) -> "TableMerger":
        return self._with(Clause("matched", "delete", predicate))

    # -- WHEN NOT MATCHED: no target row has the source row's key ---------------------------------------------
    def when_not_matched_insert(self, updates: Values, predicate: pc.Expression | None = None) -> "TableMerger":
        """Insert a row of `updates` (the primary key included; the columns left out are null)."""
        return self._with(Clause("not_matched", "insert", predicate, self._values(updates)))

    def when_not_matched_insert_all(self, predicate: pc.Expression | None = None, *,
                                    except_cols: Sequence[str] = ()) -> "TableMerger":
        """Insert the source row's columns of the table's names (`INSERT *`); `except_cols` are null."""
        return self._with(Clause("not_matched", "insert", predicate, None, tuple(except_cols)))

    # -- WHEN NOT MATCHED BY SOURCE: a target row no source row has the key of --------------------------------
    def when_not_matched_by_source_update(self, updates: Values,
                                          predicate: pc.Expression | None = None) -> "TableMerger":
        return self._with(Clause("not_matched_by_source", "update", predicate, self._values(updates)))

    def when_not_matched_by_source_delete(self, predicate: pc.Expression | None = None) -> "TableMerger":
        return self._with(Clause("not_matched_by_source", "delete", predicate))

    # -- running it -----------------------------------------------------------------------------------------
    def execute(self) -> MergeResult:
        """Plan and commit the merge as one snapshot (see the module docstring); ConcurrentUpdateError if a
        commit since the read changed a bucket the merge writes (nothing committed: run it again)."""
        if not self.clauses:
            raise MergeError(f"MERGE INTO {self.target.name}: no WHEN clause: add when_matched_update_all(), "
                             "when_not_matched_insert_all(), ...")
        source = conform_source(self.target, self.source)
        planned = self.io.latest_snapshot_id()  # 1.
        by_source = any(c.when == "not_matched_by_source" for c in self.clauses)
        if planned is None or (source.num_rows == 0 and not by_source):
            rows = self.target.schema.empty_table()
        else:
            rows = self.io.read(filter=None if by_source else self._keys_of(source), snapshot_id=planned)
        planned_changes = plan_changes(self.target, rows, source, self.clauses,  # 2.
                                       target_alias=self.target_alias, source_alias=self.source_alias)
        snapshot_id = None
        if planned_changes.changes.num_rows:
            session = self.io.session()  # 3.
            try:
                session.write(planned_changes.changes)
                snapshot_id = session.commit(planned_on=planned or 0)
            except ConcurrentUpdateError:
                session.abort()
                raise
            except BaseException:
                session.abort()
                session.release()  # a broken producer is not reused
                raise
        return MergeResult(snapshot_id, source.num_rows, planned_changes.updated, planned_changes.deleted,
                           planned_changes.inserted)

    def _keys_of(self, source: pa.Table) -> pc.Expression | None:
        """A filter keeping the target rows whose key columns hold values of the source's (float columns, whose
        NaN a set test may not match, are left to the join)."""
        tests = [pc.field(k).isin(pc.unique(source.column(k))) for k in self.target.primary_key
                 if not pat.is_floating(self.target.schema.field(k).type)]
        if not tests:
            return None
        test = tests[0]
        for more in tests[1:]:
            test = test & more
        return test
