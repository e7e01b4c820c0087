"""A commit planned on an older snapshot (`publish(..., planned_on=P)`, what SQL MERGE INTO and UPDATE commit with):
step 4 of filestore.commit refuses it when a data commit after P touched a (partition, bucket) it writes, and
lets commits to other buckets and compactions pass."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from filestore import CommitKind, CommitMessage, ConcurrentUpdateError, FileStore, compact

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                    ("v", pa.string())])


def store_of(warehouse: Path) -> FileStore:
    cat = catalog.Catalog(str(warehouse))
    cat.create_database("db", ignore_if_exists=True)
    if not cat.table_exists("db.t"):
        cat.create_table("db.t", SCHEMA, primary_key=["id", "p"], partition_by=["p"],
                         options={"write-only": "true", "bucket": "1"})
    return cat.get_table("db.t").store


def prepare(store: FileStore, ids: list[int], p: str, v: str) -> list[CommitMessage]:
    w = store.new_write()
    w.write(pa.table({"id": ids, "p": [p] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA))
    return w.prepare_commit()


def commit(store: FileStore, user: str, messages: list[CommitMessage], planned_on: int | None = None) -> int | None:
    return store.new_commit(user, new_user=True).publish(messages, identifier=1, planned_on=planned_on).snapshot_id


def test_a_data_commit_to_a_written_bucket_since_the_plan_fails_the_commit(tmp_path: Path) -> None:
    store = store_of(tmp_path)
    assert commit(store, "seed", prepare(store, [1, 2], "a", "x")) == 1
    mine = prepare(store, [1], "a", "mine")               # planned on snapshot 1
    assert commit(store, "other", prepare(store, [2], "a", "other")) == 2
    with pytest.raises(ConcurrentUpdateError, match=r"snapshot 2 changed bucket\(s\) a:0 since snapshot 1"):
        commit(store, "merge", mine, planned_on=1)
    assert store.snapshots.latest_id() == 2               # nothing published


def test_commits_to_other_buckets_and_compactions_do_not_conflict(tmp_path: Path) -> None:
    store = store_of(tmp_path)
    commit(store, "seed", prepare(store, [1], "a", "x"))
    commit(store, "seed2", prepare(store, [2], "a", "y"))
    mine = prepare(store, [1], "a", "mine")               # planned on snapshot 2
    commit(store, "other", prepare(store, [3], "b", "z"))  # another partition
    latest = store.snapshots.latest()
    assert latest is not None
    merged = compact(store.context, latest, full=True)
    assert merged
    store.new_commit("compactor", new_user=True).publish(merged, identifier=1, kind=CommitKind.COMPACT)
    assert commit(store, "merge", mine, planned_on=2) == 5


def test_planned_on_the_empty_table_conflicts_with_any_first_commit_to_its_bucket(tmp_path: Path) -> None:
    store = store_of(tmp_path)
    mine = prepare(store, [1], "a", "mine")
    commit(store, "other", prepare(store, [2], "a", "other"))
    with pytest.raises(ConcurrentUpdateError, match="since snapshot 0"):
        commit(store, "merge", mine, planned_on=0)
