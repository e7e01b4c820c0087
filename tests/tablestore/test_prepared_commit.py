"""Commits of data files written elsewhere (what Spark's driver does with its tasks' files): the log gets exactly
the snapshot's changes, a replay is recognised, and a log transaction lost between the snapshot and the log commit
is produced again by the next session of the same commit user (fenced by the transactional id)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import logstore
import tablestore
from log_helpers import SCHEMA, by_key, changes, drop_created_tables, kafka_catalog, row, rows, task_files
from tablestore.convert import value_kinds
from tablestore.writer import TableWriter

pytestmark = pytest.mark.kafka


@pytest.fixture(autouse=True)
def _drop_tables() -> Iterator[None]:
    yield
    drop_created_tables()


def _table(tmp_path: Path, bootstrap: str, **options: str) -> tablestore.Table:
    cat = kafka_catalog(tmp_path, bootstrap)
    # read with changelog.normalize = false: the log as stored (a normalized reader would hide duplicates);
    # changelog-mode upsert: the log is the files' records, produced in the commit's transaction (with `all` it
    # is the snapshot's changelog, produced after the snapshot: tablestore.log_publish, tested there)
    return cat.create_table("db.t", SCHEMA, primary_key=["id"],
                            options={"bucket": "2", "log.changelog-mode": "upsert", **options})



def _log(t: tablestore.Table) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
    return changes(t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=1.0, normalize=False))


def _data_files(t: tablestore.Table) -> set[str]:
    return {p.name for p in Path(t.path).rglob("data-*")}


def test_prepared_files_reach_the_log_once_and_a_replay_is_recognised(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    first = rows(row(1, "a"), row(2, "b"), row(1, "a2"))
    session = TableWriter(t._write_target(), commit_user="query-1", transactional_id="tx-query-1")
    with session:
        sid = session.commit_prepared(task_files(t, first), 1)
    assert by_key(t.read()) == by_key(rows(row(1, "a2"), row(2, "b")))
    assert sorted((k, r["id"], r["name"]) for k, r in _log(t)) == [("+I", 1, "a2"), ("+I", 2, "b")]
    files = _data_files(t)
    replay = task_files(t, first)
    with TableWriter(t._write_target(), commit_user="query-1", transactional_id="tx-query-1") as again:
        assert again.commit_prepared(replay, 1) == sid
    assert _data_files(t) == files  # the replay's files are deleted
    assert len(_log(t)) == 2 and t.latest_snapshot_id() == sid


def test_a_log_transaction_lost_after_the_snapshot_is_produced_again(
        tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    data = rows(row(1, "a"), row(2, "b"), row(3, "c"))
    zombie = TableWriter(t._write_target(), commit_user="query-2", transactional_id="tx-query-2")

    def crash(self: logstore.LogWriter) -> None:
        raise KeyboardInterrupt("crash between the snapshot and the log commit")

    monkeypatch.setattr(logstore.LogWriter, "commit", crash)
    with pytest.raises(KeyboardInterrupt):
        zombie.commit_prepared(task_files(t, data), 1)
    monkeypatch.undo()
    assert by_key(t.read()) == by_key(data)  # the snapshot is in, the transaction open
    assert _log(t) == []
    latest_before = t.latest_snapshot_id()
    with TableWriter(t._write_target(), commit_user="query-2", transactional_id="tx-query-2") as restarted:
        restarted.commit_prepared(task_files(t, data), 1)  # the replayed batch
    assert sorted(r["id"] for _, r in _log(t)) == [1, 2, 3]
    # a `full` reader from now on: the snapshot, then the log after the records produced again: no duplicate
    full = changes(t.read_changes(scan="full", timeout_s=1.0))
    assert sorted(r["id"] for _, r in full) == [1, 2, 3]
    assert t.latest_snapshot_id() == (latest_before or 0) + 1  # a log-only snapshot
    with TableWriter(t._write_target(), commit_user="query-2", transactional_id="tx-query-2") as third:
        third.commit_prepared(task_files(t, data), 1)  # replayed again: the log is complete now
    assert len(_log(t)) == 3


def test_eventual_consistency_prepared_files_reach_the_log(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap, **{"log.consistency": "eventual", "log.changelog-mode": "upsert"})
    data = rows(row(1, "a"), row(2, "b"))
    with TableWriter(t._write_target(), commit_user="query-3") as session:
        sid = session.commit_prepared(task_files(t, data), 1)
        assert sid is not None and not session.recover_log(sid)  # nothing to repair: flushed before the snapshot
    assert sorted(r["id"] for _, r in _log(t)) == [1, 2]
    assert by_key(t.read()) == by_key(data)


def test_a_python_session_restarted_as_the_same_user_repairs_the_log_and_writes_nothing_twice(
        tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    data = rows(row(1, "a"), row(2, "b"))
    zombie = t.log_writer(commit_user="job-1", transactional_id="tx-job-1")
    zombie.write(data)

    def crash(self: logstore.LogWriter) -> None:
        raise KeyboardInterrupt("crash between the snapshot and the log commit")

    monkeypatch.setattr(logstore.LogWriter, "commit", crash)
    with pytest.raises(KeyboardInterrupt):
        zombie.commit(1)
    monkeypatch.undo()
    with t.log_writer(commit_user="job-1", transactional_id="tx-job-1") as restarted:
        restarted.write(data)  # the job replays its checkpoint
        restarted.commit(1)
        restarted.write(data)  # and once more, after the repair: still nothing twice
        restarted.commit(1)
    assert sorted(r["id"] for _, r in _log(t)) == [1, 2]
    assert by_key(t.read()) == by_key(data)


def test_an_all_mode_log_of_prepared_files_holds_the_old_rows(tmp_path: Path, kafka_bootstrap: str) -> None:
    """Files keep no -U and store a +U as an addition, so with `log.changelog-mode` = all a prepared commit's log
    is its snapshot's changelog (tablestore.log_publish.diffs_snapshots): the old row of an update and of a
    delete, nothing for a row rewritten unchanged."""
    t = kafka_catalog(tmp_path, kafka_bootstrap).create_table(
        "db.t", SCHEMA, primary_key=["id"], options={"bucket": "2", "log.changelog-mode": "all"})
    with TableWriter(t._write_target(), commit_user="query-1") as session:
        session.commit_prepared(task_files(t, rows(row(1, "a"), row(2, "b"), row(3, "c"))), 1)
        assert sorted((k, r["id"], r["name"]) for k, r in _log(t)) == [("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c")]
        store = t._handle.store
        write = store.new_write(store.live_files(store.snapshots.latest()))
        changed = rows(row(1, "a2"), row(2, "b"), row(3, "c"))
        write.write(write.conform(changed), value_kinds(pa.array(["+U", "-D", "+U"])), conformed=True)
        session.commit_prepared(write.prepare_commit(), 2)
    # debezium-json stores a retraction (-U or -D) as its `d` event with the old row, so the kinds read back as
    # stored are compared by sign (the log's two partitions interleave the commits: compared as a multiset)
    assert sorted((k[0], r["id"], r["name"]) for k, r in _log(t)) == sorted([
        ("+", 1, "a"), ("+", 2, "b"), ("+", 3, "c"), ("-", 1, "a"), ("+", 1, "a2"), ("-", 2, "b")])
    assert by_key(t.read()) == by_key(rows(row(1, "a2"), row(3, "c")))
