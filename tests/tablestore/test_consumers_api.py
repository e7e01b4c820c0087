"""Consumers through the Python API on the real broker: `read_changes(consumer_id=...)` resumes with only the new
changes, expiry keeps the snapshot a consumer needs, `reset_consumer` moves or deletes it, `$consumers` shows it."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from filestore import ConsumerError
from log_helpers import drop_created_tables, kafka_catalog

pytestmark = pytest.mark.kafka

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


@pytest.fixture(autouse=True)
def _drop_tables() -> Iterator[None]:
    yield
    drop_created_tables()


def _table(tmp_path: Path, bootstrap: str, **options: str) -> tablestore.Table:
    return kafka_catalog(tmp_path, bootstrap).create_table("db.t", SCHEMA, primary_key=["id"],
                                                           options={"bucket": "2", **options})


def _rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.table({"id": [p[0] for p in pairs], "v": [p[1] for p in pairs]}, schema=SCHEMA)


def _read(t: tablestore.Table, **kw: Any) -> list[tuple[str, int, str]]:
    return sorted((r["_row_kind"], r["id"], r["v"]) for b in t.read_changes(timeout_s=0.5, **kw)
                  for r in b.to_pylist())


@pytest.mark.parametrize("normalize", [True, False])
def test_a_consumer_resumes_with_only_the_new_changes(tmp_path: Path, kafka_bootstrap: str,
                                                      normalize: bool) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    t.write(_rows((1, "a"), (2, "b"), (3, "c")))
    assert _read(t, consumer_id="c", normalize=normalize) == [("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c")]
    [c] = t.consumers()
    assert (c.consumer_id, c.next_snapshot_id, c.expired) == ("c", 2, False)

    t.write(_rows((1, "a2"), (4, "d")))
    got = _read(t, consumer_id="c", normalize=normalize)
    if normalize:
        assert got == [("+I", 4, "d"), ("+U", 1, "a2"), ("-U", 1, "a")]
    else:   # the records as stored (upsert mode: no -U)
        assert sorted(r[1:] for r in got) == [(1, "a2"), (4, "d")]
    assert _read(t, consumer_id="c", normalize=normalize) == []
    assert t.consumers()[0].next_snapshot_id == 3
    assert len(_read(t, normalize=normalize)) == 4   # a read without the id is not affected: the whole table


def test_a_read_that_stops_at_max_records_resumes_after_them(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    t.write(_rows((1, "a"), (2, "b")))
    t.write(_rows((3, "c")))
    first = _read(t, consumer_id="c", scan="from-timestamp", timestamp_ms=0, max_records=2)
    assert first == [("+I", 1, "a"), ("+I", 2, "b")]
    assert _read(t, consumer_id="c") == [("+I", 3, "c")]   # resumed: `scan` (full) is not used


def test_expiry_keeps_the_snapshot_a_consumer_needs(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    t.write(_rows((1, "a")))
    t.write(_rows((2, "b")))
    _read(t, consumer_id="c")              # next snapshot 3: its changes are computed from snapshot 2
    t.write(_rows((1, "a3")))
    t.write(_rows((2, "b4")))
    assert t.expire_snapshots(retain_last=1).expired_snapshots == (1,)
    assert [s.id for s in t.snapshots()] == [2, 3, 4]
    assert _read(t, consumer_id="c") == [("+U", 1, "a3"), ("+U", 2, "b4"), ("-U", 1, "a"), ("-U", 2, "b")]
    assert t.expire_snapshots(retain_last=1).expired_snapshots == (2, 3)   # caught up: needs only snapshot 4


def test_reset_consumer_moves_and_deletes_it(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = _table(tmp_path, kafka_bootstrap)
    for i in range(1, 4):
        t.write(_rows((i, f"v{i}")))
    assert len(_read(t, consumer_id="c")) == 3
    moved = t.reset_consumer("c", snapshot=2)
    assert moved is not None and moved.next_snapshot_id == 2
    assert _read(t, consumer_id="c") == [("+I", 2, "v2"), ("+I", 3, "v3")]   # the changes of snapshots 2 and 3

    consumers = t.system_table("consumers").to_pylist()
    assert [(r["consumer_id"], r["next_snapshot_id"], r["expired"], r["log_expired"]) for r in consumers] == [
        ("c", 4, False, False)]
    assert sum(dict(consumers[0]["log_offsets"]).values()) > 0

    assert t.reset_consumer("c") is None
    assert t.consumers() == [] and t.system_table("consumers").num_rows == 0
    with pytest.raises(ConsumerError, match="table 'db.t': consumer 'c' cannot be reset to snapshot 9"):
        t.reset_consumer("c", snapshot=9)
    with pytest.raises(ConsumerError, match="is not a consumer id"):
        list(t.read_changes(consumer_id="../x", timeout_s=0.1))
