"""A table's log store against the real broker: round trips per format and changelog mode, transactional and
eventual visibility, the hybrid `full` scan, snapshot log offsets and partition = bucket."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition

import tablestore
from filestore.bucket import bucket_of
from log_helpers import (SCHEMA, as_dict, by_key, changes, drop_created_tables, kafka_catalog, materialize, per_key,
                         row, rows)
from logstore.kafka import LogStoreUnavailableError

pytestmark = pytest.mark.kafka


@pytest.fixture(autouse=True)
def _drop_tables() -> Iterator[None]:
    yield
    drop_created_tables()


def pk_table(tmp_path: Path, bootstrap: str, **options: str) -> tablestore.Table:
    cat = kafka_catalog(tmp_path, bootstrap)
    return cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2", **options})


def all_changes(t: tablestore.Table, timeout_s: float = 1.0, **kw: Any) -> list[tuple[str, dict[str, Any]]]:
    return changes(t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=timeout_s, **kw))


def raw_messages(t: tablestore.Table, bootstrap: str, expected: int, *, committed: bool = True) -> list[Any]:
    """Every message of the table's topic, read with a plain consumer (no tablestore code involved)."""
    topic = t.describe()["options"]["log.topic"]  # type: ignore[index]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "raw-test", "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    try:
        partitions = int(t.describe()["bucket"])  # type: ignore[call-overload]
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = consumer.consume(num_messages=1000, timeout=0.3)
            out.extend(m for m in got if m.error() is None)
            if len(out) >= expected and not got:
                break
        return out
    finally:
        consumer.close()


# -- round trips ----------------------------------------------------------------------------------

A1, A2, B1, C1 = row(1, "a"), row(1, "a2", qty=5, price=9.25), row(2, "b"), row(3, "c")
D4 = row(4, "d", qty=None, price=None, ts=None)
KEY_ONLY_B = row(2, None, qty=None, price=None, ts=None)


@pytest.mark.parametrize("fmt,mode", [
    ("debezium-json", "upsert"), ("debezium-json", "all"), ("debezium-avro", "upsert"), ("debezium-avro", "all"),
    ("upsert", "upsert"), ("upsert", "auto"),
])
def test_round_trip_primary_key_table(tmp_path: Path, kafka_bootstrap: str, fmt: str, mode: str) -> None:
    t = pk_table(tmp_path, kafka_bootstrap, **{"log.format": fmt, "log.changelog-mode": mode})
    upsert = mode in ("upsert", "auto")
    t.write(rows(A1, B1, C1))
    with t.log_writer() as w:
        # an upsert changelog may delete by key only: the normalizer restores the row it deletes
        w.write(rows(A1, A2, KEY_ONLY_B if upsert else B1, D4, kinds=["-U", "+U", "-D", "+I"]))
        w.commit()

    # read by another catalog, as a separate consuming job would (formats and writer schemas from the metadata)
    other = tablestore.Catalog(str(tmp_path / "wh")).get_table("db.t")
    got = all_changes(other)
    stored = all_changes(other, normalize=False)

    a1, a2, b1, c1, d4 = map(as_dict, (A1, A2, B1, C1, D4))
    # whatever the mode: the changelog of the commits, -U/+U and -D carrying the previous full row
    expected = {1: [("+I", a1), ("-U", a1), ("+U", a2)], 2: [("+I", b1), ("-D", b1)], 3: [("+I", c1)],
                4: [("+I", d4)]}
    assert per_key(got) == expected
    assert materialize(got) == by_key(t.read()) == {1: a2, 3: c1, 4: d4}
    # the records as stored
    if upsert:  # no -U; the delete by key only
        assert [(k in ("+I", "+U"), r) for k, r in per_key(stored)[1]] == [(True, a1), (True, a2)]
        assert per_key(stored)[2][-1] == ("-D", as_dict(KEY_ONLY_B))
    else:  # Debezium has no single-sided update: -U/+U come back as -D/+I, like Flink reads them
        assert per_key(stored) == expected | {1: [("+I", a1), ("-D", a1), ("+I", a2)]}


@pytest.mark.parametrize("fmt", ["debezium-json", "debezium-avro"])
def test_round_trip_table_without_primary_key(tmp_path: Path, kafka_bootstrap: str, fmt: str) -> None:
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    t = cat.create_table("db.events", SCHEMA, options={"bucket": "1", "log.format": fmt})
    assert t.describe()["log"]["changelog-mode"] == "all"  # type: ignore[index]
    t.write(rows(A1, B1))
    with t.log_writer() as w:
        w.write(rows(A1, A2, B1, C1, kinds=["-U", "+U", "-D", "+I"]))
        w.commit()

    got = all_changes(t)

    a1, a2, b1, c1 = map(as_dict, (A1, A2, B1, C1))
    assert got == [("+I", a1), ("+I", b1), ("-D", a1), ("+I", a2), ("-D", b1), ("+I", c1)]
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [a2, c1]


# -- transactions and consistency -----------------------------------------------------------------

def test_aborted_transaction_is_invisible(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = pk_table(tmp_path, kafka_bootstrap)
    w = t.log_writer()
    w.write(rows(row(1, "a"), row(2, "b")))
    w.commit()
    w.write(rows(row(3, "aborted")))
    assert w._log_writer is not None
    w._log_writer.flush()  # delivered into the open transaction, then aborted
    w.abort()
    w.write(rows(row(4, "d")))
    w.commit()
    w.close()

    got = all_changes(t)

    assert sorted((k, r["id"]) for k, r in got) == [("+I", 1), ("+I", 2), ("+I", 4)]
    assert sorted(by_key(t.read())) == [1, 2, 4]
    # the aborted record did reach the topic: only read_uncommitted consumers see it
    uncommitted = raw_messages(t, kafka_bootstrap, 4, committed=False)
    assert sorted(json.loads(m.key())["id"] for m in uncommitted) == [1, 2, 3, 4]


def test_failed_file_store_commit_aborts_the_log_transaction(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filestore.commit import FileStoreCommit

    t = pk_table(tmp_path, kafka_bootstrap)

    def failing_commit(*args: object, **kwargs: object) -> object:
        raise OSError("disk full while writing the snapshot")

    w = t.log_writer()
    w.write(rows(row(1, "lost")))
    monkeypatch.setattr(FileStoreCommit, "publish", failing_commit)
    with pytest.raises(OSError, match="disk full"):
        w.commit()
    monkeypatch.undo()
    w.write(rows(row(2, "kept")))
    w.commit()
    w.close()

    assert [(k, r["id"]) for k, r in all_changes(t)] == [("+I", 2)]
    assert list(by_key(t.read())) == [2]


def test_failed_log_flush_aborts_the_log_transaction(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker fails while the checkpoint flushes: that commit publishes nothing, neither a snapshot nor log
    records, and a later commit does not carry the failed commit's records into the log."""
    t = pk_table(tmp_path, kafka_bootstrap)
    w = t.log_writer()
    w.write(rows(row(1, "lost")))
    log_writer = w._log_writer
    assert log_writer is not None

    def broker_down() -> None:
        raise LogStoreUnavailableError("broker down during the checkpoint")

    monkeypatch.setattr(log_writer, "flush", broker_down)
    with pytest.raises(LogStoreUnavailableError):
        w.commit()
    monkeypatch.undo()
    assert t.snapshots() == []
    w.write(rows(row(2, "kept")))
    w.commit()
    w.close()

    assert list(by_key(t.read())) == [2]
    assert [(k, r["id"]) for k, r in all_changes(t)] == [("+I", 2)]


def test_transactional_changes_are_invisible_until_commit(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = pk_table(tmp_path, kafka_bootstrap)
    w = t.log_writer()
    w.write(rows(row(1, "a"), row(2, "b")))
    assert w._log_writer is not None
    w._log_writer.flush()  # the records are on the broker, in an open transaction
    assert len(raw_messages(t, kafka_bootstrap, 2, committed=False)) == 2

    assert all_changes(t, timeout_s=0.5) == []

    w.commit()
    w.close()
    assert sorted(r["id"] for _, r in all_changes(t)) == [1, 2]


def test_eventual_changes_are_visible_before_the_file_store_commit(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = pk_table(tmp_path, kafka_bootstrap, **{"log.consistency": "eventual"})
    w = t.log_writer()
    w.write(rows(row(1, "a"), row(2, "b")))

    seen = all_changes(t, timeout_s=5, max_records=2)  # no flush, no commit: the producer sends on its own

    assert sorted((k, r["id"]) for k, r in seen) == [("+I", 1), ("+I", 2)]
    assert t.snapshots() == [] and t.read().num_rows == 0
    w.commit()
    w.close()
    assert sorted(by_key(t.read())) == [1, 2]
    assert t.snapshots()[-1].log_offsets  # eventual commits record offsets too


# -- the hybrid full scan -------------------------------------------------------------------------

def test_full_scan_across_a_snapshot_boundary_yields_each_change_once(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = pk_table(tmp_path, kafka_bootstrap)
    t.write(rows(*(row(i, f"a{i}") for i in range(1, 6))))
    t.write(rows(row(2, "b2"), row(3, "b3"), row(5, "a5"), row(6, "b6"), kinds=["+U", "+U", "-D", "+I"]))
    snapshot_state = by_key(t.read())

    it: Iterator[pa.RecordBatch] = t.read_changes(scan="full", timeout_s=1.5)
    first = next(it)  # the scan has pinned the snapshot and its log offsets
    t.write(rows(row(1, "c1"), row(4, None), row(7, "c7"), kinds=["+U", "-D", "+I"]))
    got = changes([first, *it])

    n = len(snapshot_state)
    snapshot_part, log_part = got[:n], got[n:]
    assert all(k == "+I" for k, _ in snapshot_part)
    assert by_key(pa.Table.from_pylist([r for _, r in snapshot_part], schema=SCHEMA)) == snapshot_state
    # only C follows: nothing of A or B again, C's update and delete carry the snapshot's rows
    assert per_key(log_part) == {
        1: [("-U", snapshot_state[1]), ("+U", as_dict(row(1, "c1")))],
        4: [("-D", snapshot_state[4])],
        7: [("+I", as_dict(row(7, "c7")))],
    }
    assert materialize(got) == by_key(t.read())


def test_snapshot_log_offsets_and_partition_equals_bucket(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = pk_table(tmp_path, kafka_bootstrap, bucket="3")
    t.write(rows(*(row(i, f"a{i}") for i in range(30))))
    t.write(rows(*(row(i, f"b{i}") for i in range(10))))

    messages = raw_messages(t, kafka_bootstrap, 40)

    assert len(messages) == 40
    ids = [json.loads(m.key())["id"] for m in messages]
    expected_buckets = bucket_of(pa.table({"id": pa.array(ids, pa.int64())}), ["id"], 3)
    assert [m.partition() for m in messages] == expected_buckets.tolist()
    # the latest snapshot covers, per bucket, up to the offset after that bucket's last record
    last: dict[int, int] = {}
    for m in messages:
        last[m.partition()] = max(last.get(m.partition(), -1), m.offset() + 1)
    first, latest = t.snapshots()[0], t.snapshots()[-1]
    assert dict(latest.log_offsets) == last
    assert all(first.log_offsets[p] < latest.log_offsets[p] for p in first.log_offsets)

    # a compaction snapshot keeps the offsets, and a full scan from it replays nothing twice
    t.compact(full=True)
    assert t.snapshots()[-1].kind == "COMPACT"
    assert dict(t.snapshots()[-1].log_offsets) == last
    got = changes(t.read_changes(scan="full", timeout_s=1))
    assert sorted((k, r["id"], r["name"]) for k, r in got) == sorted(
        ("+I", i, f"b{i}" if i < 10 else f"a{i}") for i in range(30))


@pytest.mark.kafka
def test_reading_never_stops_before_the_changes_that_existed_when_it_began(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """The idle timeout only counts once the reader has caught up: even timeout 0 returns every existing change,
    when the broker holds each fetch for up to a second (it waits for 1 MB that never comes)."""
    t = pk_table(tmp_path, kafka_bootstrap, **{"log.properties.fetch.min.bytes": "1000000",
                                               "log.properties.fetch.wait.max.ms": "1000"})
    t.write(rows(row(1, "a"), row(2, "b")))
    t.write(rows(row(3, "c")))
    got = all_changes(t, timeout_s=0)
    assert sorted(r["id"] for _, r in got) == [1, 2, 3]


def test_change_tracking_off_keeps_the_table_api_writes_out_of_the_log(tmp_path: Path, kafka_bootstrap: str) -> None:
    """`change-tracking` = false (a table option, altered off and on): the table API's writes reach the file store
    only, like Spark's; turned back on, the next write is in the log again."""
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(rows(A1, B1))
    untracked = cat.alter_table_options("db.t", {"change-tracking": "false"})
    untracked.write(rows(C1))
    assert untracked.read().num_rows == 3
    assert len(raw_messages(untracked, kafka_bootstrap, expected=2)) == 2
    tracked = cat.alter_table_options("db.t", {"change-tracking": "true"})
    tracked.write(rows(D4))
    assert len(raw_messages(tracked, kafka_bootstrap, expected=3)) == 3
