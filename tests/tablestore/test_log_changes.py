"""The changelog of a primary-key table's commits from its log (tablestore.log_changes, `Table.read_changes`) against
a dict replay of the same commits, for each changelog mode and consistency; ranges read in pieces give the
changes of the whole; commit boundaries; an expired snapshot is a clear error."""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from change_oracle import (SCHEMA, Change, as_table, change_tuples, ordered, per_key, random_commits, replay,
                           stored)
from log_helpers import drop_created_tables, kafka_catalog
from tablestore.log_changes import ChangeSource, CommitOffsets, commit_end, commit_start, range_changes

pytestmark = pytest.mark.kafka


@pytest.fixture(autouse=True)
def _drop_tables() -> Iterator[None]:
    yield
    drop_created_tables()


def _table(tmp_path: Path, bootstrap: str, **options: str) -> tablestore.Table:
    return kafka_catalog(tmp_path, bootstrap).create_table("db.t", SCHEMA, primary_key=["id"],
                                                           options={"bucket": "2", **options})


def _read(t: tablestore.Table, **kw: Any) -> list[Change]:
    return change_tuples(r for b in t.read_changes(timeout_s=0.5, **kw) for r in b.to_pylist())


def _source(t: tablestore.Table) -> ChangeSource:
    h = t._handle
    assert h.log is not None
    return ChangeSource(h.identifier, h.schema.arrow_schema, h.schema.primary_keys, h.store, h.log)


def _range(t: tablestore.Table, bucket: int, start: int, end: int) -> list[Change]:
    return change_tuples(r for c in range_changes(_source(t), bucket, start, end) for r in c.to_pylist())


@pytest.mark.parametrize("mode,consistency", [("upsert", "transactional"), ("all", "transactional"),
                                              ("upsert", "eventual")])
def test_read_changes_is_the_changelog_of_the_commits(tmp_path: Path, kafka_bootstrap: str, mode: str,
                                                      consistency: str) -> None:
    t = _table(tmp_path, kafka_bootstrap, **{"log.changelog-mode": mode, "log.consistency": consistency})
    commits = random_commits(3, 6)
    for records in commits:
        t.write(as_table(records))
    expected, state = replay(commits)

    got = _read(t, scan="from-timestamp", timestamp_ms=0)

    assert per_key(got) == per_key(expected)  # each key's changes in commit order
    assert {r["id"]: (r["id"], r["v"], r["n"]) for r in t.read().to_pylist()} == state
    raw = _read(t, scan="from-timestamp", timestamp_ms=0, normalize=False)
    assert len(raw) == len(stored(commits, mode))  # the records as stored, ghosts and rewrites included


def test_a_range_read_in_pieces_gives_the_changes_of_the_whole(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    commits = random_commits(5, 5)
    for records in commits:
        t.write(as_table(records))
    store = t._handle.store
    everything: list[Change] = []
    for bucket in (0, 1):
        offsets = CommitOffsets(store, bucket)
        end = offsets.of(offsets.latest or 0)
        whole = _range(t, bucket, 0, end)
        everything += whole
        boundaries = offsets.between(0, 0, end)
        assert len(boundaries) == len(commits) - 1
        for cut in boundaries:  # a batch ending at a commit boundary: the next one starts from the snapshot
            assert _range(t, bucket, 0, cut) + _range(t, bucket, cut, end) == whole
        pieces = [0, *boundaries, end]
        assert [c for lo, hi in zip(pieces, pieces[1:]) for c in _range(t, bucket, lo, hi)] == whole
    expected, _ = replay(commits)
    assert ordered(everything) == ordered(expected)


def test_commit_boundaries_of_starts_and_capped_ends(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap, bucket="1")
    commits = [pa.table({"id": [i, i + 100, i + 200], "v": ["x"] * 3, "n": [1] * 3}, schema=SCHEMA)
                   for i in range(3)]
    for rows in commits:
        t.write(rows)
    t.compact(full=True)  # a snapshot at the same offsets
    store = t._handle.store
    offsets = CommitOffsets(store, 0)
    b1, b2, b3 = offsets.between(0, -1, 10**9)  # each commit: 3 records and a transaction marker
    assert (b1, b2 - b1, b3 - b2) == (3, 4, 4)
    assert offsets.last_at_or_below(b2) == 2 and offsets.last_at_or_below(b3 + 5) == offsets.latest
    assert commit_start(store, 0, b1 + 1) == b1  # inside commit 2: its start
    assert commit_start(store, 0, b2) == b2  # at a commit's start: unchanged
    assert commit_start(store, 0, b3 + 1) == b3 + 1  # past every snapshot's records
    assert commit_end(store, 0, 0, b2 + 2, b3) == b2  # the last boundary within the cap
    assert commit_end(store, 0, b1, b1 + 1, b3) == b2  # one commit at least, never split
    assert commit_end(store, 0, b2, b3 + 1, b3) == b3  # the cap beyond the end


def test_a_start_before_the_earliest_snapshot_left_is_a_clear_error(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap, bucket="1")
    for i in range(4):
        t.write(pa.table({"id": [i], "v": ["x"], "n": [i]}, schema=SCHEMA))
        time.sleep(0.01)
    t.expire_snapshots(retain_last=2)
    earliest = t.snapshots()[0].id
    with pytest.raises(tablestore.ChangesExpiredError, match=f"table 'db.t'.*bucket 0.*before snapshot {earliest}"):
        list(t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=0.5))
    # from a retained snapshot on, reading works
    full = _read(t, scan="full")
    assert sorted(full) == [("+I", i, "x", i) for i in range(4)]


def test_a_commit_whose_log_transaction_was_lost_is_read_once_wherever_a_range_starts(
        tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot of a commit is in but its Kafka transaction was lost (a crash between steps 3 and 4 of the
    commit): the next session of the same user produces its records again, after a log-only snapshot. A range
    starting between the two compares with the table before that commit, so its changes come exactly once."""
    import logstore

    t = _table(tmp_path, kafka_bootstrap, bucket="1")
    commits = random_commits(7, 3)
    t.write(as_table(commits[0]))
    zombie = t.log_writer(commit_user="job", transactional_id="tx-job")
    zombie.write(as_table(commits[1]))

    def crash(self: logstore.LogWriter) -> None:
        raise KeyboardInterrupt("crash between the snapshot and the log commit")

    monkeypatch.setattr(logstore.LogWriter, "commit", crash)
    with pytest.raises(KeyboardInterrupt):
        zombie.commit(1)
    monkeypatch.undo()
    with t.log_writer(commit_user="job", transactional_id="tx-job") as restarted:
        restarted.write(as_table(commits[1]))  # the job replays its checkpoint: the log is produced again
        restarted.commit(1)
    t.write(as_table(commits[2]))
    expected, _ = replay(commits)

    offsets = CommitOffsets(t._handle.store, 0)
    end = offsets.of(offsets.latest or 0)
    cuts = offsets.between(0, 0, end)
    assert len(cuts) == 3  # commit 1, the lost commit 2, its records produced again (commit 3 ends at `end`)
    assert ordered(_range(t, 0, 0, end)) == ordered(expected)
    for cut in cuts:
        assert ordered(_range(t, 0, 0, cut) + _range(t, 0, cut, end)) == ordered(expected), cut
