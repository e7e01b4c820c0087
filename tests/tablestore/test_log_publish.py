"""A commit's log produced after its snapshot, one bucket at a time (tablestore.log_publish: what Spark's executors
run, one task per bucket): the snapshot is pending until a log-only snapshot records the buckets' offsets, `full`
readers start before it, a retried or fenced bucket lands once (transactional), and a later session publishes what
a dead one left pending."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from log_helpers import SCHEMA, by_key, changes, drop_created_tables, kafka_catalog, row, rows, task_files
from tablestore import log_publish
from tablestore.writer import TableWriter

pytestmark = pytest.mark.kafka


@pytest.fixture(autouse=True)
def _drop_tables() -> Iterator[None]:
    yield
    drop_created_tables()


def _table(tmp_path: Path, bootstrap: str, **options: str) -> tablestore.Table:
    cat = kafka_catalog(tmp_path, bootstrap)
    return cat.create_table("db.t", SCHEMA, primary_key=["id"],
                            options={"bucket": "3", "log.changelog-mode": "all", **options})



def _log(t: tablestore.Table) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
    """The log as stored (read_committed for a transactional table)."""
    return changes(t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=1.0, normalize=False))


def _full(t: tablestore.Table) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
    return changes(t.read_changes(scan="full", timeout_s=1.0))


def _publish(t: tablestore.Table, plan: log_publish.PublishPlan) -> dict[int, int]:
    handle = t._handle
    assert handle.log is not None
    offsets = {}
    for bucket in plan.buckets:
        end = log_publish.publish_bucket(t.name, handle.store, handle.log, plan, bucket)
        if end is not None:
            offsets[bucket] = end
    return offsets


DATA = rows(*(row(i, f"v{i}") for i in range(12)))


def _commit_and_publish(t: tablestore.Table, session: TableWriter, data: pa.Table, identifier: int) -> None:
    """`data` committed by `session` as commit `identifier` with its log pending, then its log published and
    recorded (the publishing producer stays cached in this process)."""
    session.commit_prepared(task_files(t, data), identifier, defer_log=True)
    [plan] = log_publish.pending_plans(t._handle.store)
    log_publish.record_published(t._handle.store, plan, _publish(t, plan))


def test_a_deferred_log_is_pending_until_its_buckets_are_published(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    with TableWriter(t._write_target(), commit_user="q1") as session:
        sid = session.commit_prepared(task_files(t, DATA), 1, defer_log=True)
    store = t._handle.store
    assert sid is not None and store.snapshots.latest().log_pending == (sid,)
    assert by_key(t.read()) == by_key(DATA)   # the data is in
    assert _log(t) == []                       # the log is not yet
    assert _full(t) == []                      # a full reader starts before the pending snapshot: nothing yet
    [plan] = log_publish.pending_plans(store)
    assert (plan.snapshot_id, plan.commit_user, plan.identifier) == (sid, "q1", 1)
    assert len(plan.buckets) == 3              # 12 keys over 3 buckets
    offsets = _publish(t, plan)
    recorded = log_publish.record_published(store, plan, offsets)
    latest = store.snapshots.latest()
    assert recorded == latest.id and latest.log_pending == () and latest.log_offsets == offsets
    assert sorted(r["id"] for k, r in _log(t) if k == "+I") == list(range(12))
    full = _full(t)
    assert sorted(r["id"] for _, r in full) == list(range(12)) and {k for k, _ in full} == {"+I"}
    assert log_publish.pending_plans(store) == []
    assert log_publish.record_published(store, plan, offsets) is None   # recorded once


def test_a_retried_bucket_lands_once_and_a_fenced_attempt_is_aborted(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    with TableWriter(t._write_target(), commit_user="q2") as session:
        session.commit_prepared(task_files(t, DATA), 1, defer_log=True)
    handle = t._handle
    assert handle.log is not None
    [plan] = log_publish.pending_plans(handle.store)
    first, second = plan.buckets[0], plan.buckets[1]
    # an attempt that produced bucket `second` and died before committing its transaction
    zombie = handle.log.new_writer(log_publish.transactional_id(t.name, "q2", second))
    snapshot_rows = t.read()
    zombie.write(snapshot_rows.add_column(0, "_row_kind", [["+I"] * snapshot_rows.num_rows]),
                 [second] * snapshot_rows.num_rows)
    zombie.prepare()
    end_first = log_publish.publish_bucket(t.name, handle.store, handle.log, plan, first)
    again = log_publish.publish_bucket(t.name, handle.store, handle.log, plan, first)   # a retry after success
    assert again == end_first
    offsets = _publish(t, plan)   # bucket `second` fences the zombie
    assert offsets[first] == end_first
    log_publish.record_published(handle.store, plan, offsets)
    ids = sorted(r["id"] for _, r in _log(t))
    assert ids == list(range(12))   # each change once: no retry doubled, the zombie's records aborted
    zombie.close()


def test_a_pending_log_left_by_a_dead_session_is_published_by_the_next(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    with TableWriter(t._write_target(), commit_user="dead") as session:
        first = session.commit_prepared(task_files(t, DATA), 1, defer_log=True)
    more = rows(row(3, "changed"), row(20, "new"))
    with TableWriter(t._write_target(), commit_user="next") as session:
        second = session.commit_prepared(task_files(t, more), 1, defer_log=True)
    store = t._handle.store
    plans = log_publish.pending_plans(store)
    assert [p.snapshot_id for p in plans] == [first, second]
    assert _full(t) == []   # both pending: a full reader starts before the first
    for plan in plans:
        log_publish.record_published(store, plan, _publish(t, plan))
    assert store.snapshots.latest().log_pending == ()
    full = by_key(rows(*[row(r["id"], r["name"]) for k, r in _full(t) if k in ("+I", "+U")]))
    assert full == by_key(t.read())


def test_eventual_consistency_publishes_without_transactions(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap, **{"log.consistency": "eventual", "log.changelog-mode": "upsert"})
    with TableWriter(t._write_target(), commit_user="q3") as session:
        session.commit_prepared(task_files(t, DATA), 1, defer_log=True)
    store = t._handle.store
    [plan] = log_publish.pending_plans(store)
    log_publish.record_published(store, plan, _publish(t, plan))
    assert sorted(r["id"] for _, r in _log(t)) == list(range(12))


def test_another_writers_pending_log_is_left_to_it_for_a_while(
        tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    with TableWriter(t._write_target(), commit_user="busy") as session:
        theirs = session.commit_prepared(task_files(t, DATA), 1, defer_log=True)
    with TableWriter(t._write_target(), commit_user="me") as session:
        mine = session.commit_prepared(task_files(t, rows(row(40, "x"))), 1, defer_log=True)
    store = t._handle.store
    assert [p.snapshot_id for p in log_publish.pending_plans(store, "me")] == [mine]   # theirs may be publishing
    monkeypatch.setattr(log_publish, "ORPHAN_AFTER_MS", 0)   # pending that long: its writer is gone
    assert [p.snapshot_id for p in log_publish.pending_plans(store, "me")] == [theirs, mine]


def test_a_cached_producer_fenced_by_another_process_is_replaced(
        tmp_path: Path, kafka_bootstrap: str, caplog: pytest.LogCaptureFixture) -> None:
    """Executors keep a bucket's started producer for the next commit; one fenced meanwhile (another attempt of
    the same bucket started elsewhere) fails, and the bucket is produced again by a fresh one, once."""
    t = _table(tmp_path, kafka_bootstrap, bucket="1")
    handle = t._handle
    assert handle.log is not None
    with TableWriter(t._write_target(), commit_user="q5") as session:
        _commit_and_publish(t, session, DATA, 1)   # its producer is now cached
        intruder = handle.log.new_writer(log_publish.transactional_id(t.name, "q5", 0))
        intruder.start()   # fences the cached producer
        session.commit_prepared(task_files(t, rows(row(100, "late"))), 2, defer_log=True)
    [second] = log_publish.pending_plans(handle.store)
    with caplog.at_level("INFO", logger="tablestore.log_publish"):
        log_publish.record_published(handle.store, second, _publish(t, second))
    assert "cached log producer failed" in caplog.text
    assert sorted(r["id"] for _, r in _log(t)) == sorted([*range(12), 100])
    intruder.close()


def test_a_cached_producer_whose_bucket_another_process_published_since_is_not_used(
        tmp_path: Path, kafka_bootstrap: str, caplog: pytest.LogCaptureFixture) -> None:
    """When another process has published a later commit of the bucket (the other executor ran its last task),
    the bucket's marker says so: the cached producer, fenced by that process's, is replaced before it produces
    anything, and every record lands once."""
    t = _table(tmp_path, kafka_bootstrap, bucket="1")
    handle = t._handle
    assert handle.log is not None
    with TableWriter(t._write_target(), commit_user="q7") as session:
        _commit_and_publish(t, session, DATA, 1)   # its producer is now cached
        here = dict(log_publish._WRITERS)
        log_publish._WRITERS.clear()   # commit 2 published as by another process: a producer of its own
        _commit_and_publish(t, session, rows(row(100, "there")), 2)
        for other, _ in log_publish._WRITERS.values():
            other.close()
        log_publish._WRITERS.clear()
        log_publish._WRITERS.update(here)   # back in this process, whose producer the other one fenced
        session.commit_prepared(task_files(t, rows(row(101, "here"))), 3, defer_log=True)
    [third] = log_publish.pending_plans(handle.store)
    with caplog.at_level("INFO", logger="tablestore.log_publish"):
        log_publish.record_published(handle.store, third, _publish(t, third))
    assert "marker names commit 2, which another process published" in caplog.text
    assert "cached log producer failed" not in caplog.text
    assert sorted(r["id"] for _, r in _log(t)) == sorted([*range(12), 100, 101])


def test_records_published_before_their_offsets_are_recorded_read_as_their_commit(
        tmp_path: Path, kafka_bootstrap: str) -> None:
    """Between a bucket's transaction and the log-only snapshot, a normalized reader already sees the records,
    after every recorded offset: they are compared with the table before the pending snapshot, not with it."""
    t = _table(tmp_path, kafka_bootstrap)
    with TableWriter(t._write_target(), commit_user="q6") as session:
        session.commit_prepared(task_files(t, DATA), 1, defer_log=True)
        session.compact(full=True)   # a snapshot after the pending one, as a concurrent compactor makes
    store = t._handle.store
    [plan] = log_publish.pending_plans(store)
    offsets = _publish(t, plan)   # the records are in the log; their offsets not yet in a snapshot
    normalized = changes(t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=1.0))
    assert sorted((k, r["id"]) for k, r in normalized) == [("+I", i) for i in range(12)]
    log_publish.record_published(store, plan, offsets)
    again = changes(t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=1.0))
    assert sorted((k, r["id"]) for k, r in again) == [("+I", i) for i in range(12)]
