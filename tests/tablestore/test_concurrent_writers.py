"""Issue 11 item 5: concurrent writers at full speed all make progress: retries wait with exponential backoff
and jitter, within a budget in count and in time. Processes, as separate jobs would run."""
from __future__ import annotations

import multiprocessing
import random
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from filestore import FileStoreOptions, RetryBudget

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("writer", pa.int64()), ("n", pa.int64())])
COMMITS = 20


def _writer(warehouse: str, writer: int) -> int:
    t = tablestore.Catalog(warehouse).get_table("db.t")
    for n in range(COMMITS):
        # its own keys, on every bucket, and one key every writer updates
        ids = [writer * 1000 + n * 10 + i for i in range(8)] + [0]
        t.write(pa.table({"id": ids, "writer": [writer] * len(ids), "n": [n] * len(ids)}, schema=SCHEMA))
    return writer


@pytest.mark.parametrize("writers", [2, 4])
def test_concurrent_writers_all_commit_everything(tmp_path: Path, writers: int) -> None:
    wh = str(tmp_path / "wh")
    cat = tablestore.Catalog(wh)
    cat.create_database("db")
    cat.create_table("db.t", schema=SCHEMA, primary_key=["id"],
                     options={"bucket": "4", "num-sorted-run.compaction-trigger": "3", "commit.max-retries": "5"})
    with ProcessPoolExecutor(writers, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = sorted(pool.map(_writer, [wh] * writers, range(1, writers + 1)))
    assert done == list(range(1, writers + 1))  # no writer gave up
    got = cat.get_table("db.t").read()
    assert got.num_rows == writers * COMMITS * 8 + 1
    mine = [r for r in got.to_pylist() if r["id"] != 0]
    assert sorted((r["writer"], r["n"]) for r in mine) == sorted(
        (w, n) for w in range(1, writers + 1) for n in range(COMMITS) for _ in range(8))
    appends = [s for s in cat.get_table("db.t").snapshots() if s.kind == "APPEND"]
    assert len(appends) == writers * COMMITS


def _options(**overrides: int) -> FileStoreOptions:
    base: dict[str, object] = dict(bucket=1, file_format="parquet", file_compression="zstd", write_buffer_size=1 << 20,
                target_file_size=1 << 20, commit_max_retries=10, manifest_merge_min_count=30,
                snapshot_num_retained_min=1, snapshot_num_retained_max=10, snapshot_time_retained_ms=1000,
                compaction_trigger=5, compaction_max_size_amplification_percent=200, compaction_size_ratio=1)
    base.update(overrides)
    return FileStoreOptions(**base)  # type: ignore[arg-type]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, s: float) -> None:
        self.waits.append(s)
        self.now += s


def test_waits_back_off_exponentially_with_jitter_up_to_the_maximum() -> None:
    clock = FakeClock()
    budget = RetryBudget(_options(commit_max_retries=12, commit_timeout_ms=0, commit_min_retry_wait_ms=10,
                                  commit_max_retry_wait_ms=1000),
                         rng=random.Random(1), clock=lambda: clock.now, sleep=clock.sleep)
    while budget.retry():
        pass
    assert budget.retries == 12 and len(clock.waits) == 12
    for i, w in enumerate(clock.waits):
        assert 0.010 <= w <= min(1.0, 0.010 * 2 ** i)
    assert len(set(clock.waits)) == 12  # jittered
    assert max(clock.waits[6:]) > 0.2  # and growing


def test_a_writer_keeps_waiting_for_its_turn_until_the_time_budget_is_spent() -> None:
    """The count alone is the wrong budget while other writers hold the buckets: retries go on, spaced out,
    until both the count and the time are spent."""
    clock = FakeClock()
    budget = RetryBudget(_options(commit_max_retries=3, commit_timeout_ms=5000, commit_min_retry_wait_ms=10,
                                  commit_max_retry_wait_ms=500), rng=random.Random(2), clock=lambda: clock.now,
                         sleep=clock.sleep)
    while budget.retry(attempt_s=0.2):
        pass
    assert budget.retries > 3 and 4.0 < clock.now <= 5.0
    assert "budget: 3 retries and 5000 ms" in budget.describe()
    assert min(clock.waits) >= 0.010 and max(clock.waits) <= 0.5


def test_a_zero_time_budget_leaves_the_count() -> None:
    clock = FakeClock()
    budget = RetryBudget(_options(commit_max_retries=4, commit_timeout_ms=0), rng=random.Random(3),
                         clock=lambda: clock.now, sleep=clock.sleep)
    while budget.retry():
        pass
    assert budget.retries == 4
