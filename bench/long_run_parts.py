"""The moving parts of bench/service_long_run_bench.py: the producer feeding the CDC topics at a fixed rate, the
paused-and-resumed consumer and its check, the `tablestore service` process with its CPU and RSS, one sample of a
table (sorted runs, snapshots kept, a timed 1% key-range read and the freshness of what it read), and the
statistics (percentiles, slopes).
"""
from __future__ import annotations

import datetime as dt
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from proc_cpu import tree_cpu_s  # noqa: E402
from logstore import ROW_KIND_COLUMN  # noqa: E402
from logstore.raw import RawProducer  # noqa: E402
from tablestore.cdc.shop import ShopOrders  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EPOCH = dt.datetime(1970, 1, 1)


# -- statistics ---------------------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def slope_per_min(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per minute; None with fewer than 3 points."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx * 60


# -- the producer -------------------------------------------------------------------------------------------------
class Producer(threading.Thread):
    """Produces the shop generator's change events (one generator per table, seeds `seed + i`) into each table's
    topic at `rate` events/s in all, spread evenly, in 0.1 s steps; `records` counts what was acknowledged
    (tombstones included: the ingest job counts them too)."""

    STEP_S = 0.1

    def __init__(self, bootstrap: str, topics: list[str], rate: float, keys: int, seed: int) -> None:
        super().__init__(name="bench-producer", daemon=True)
        self.shops = [ShopOrders(keys=keys, seed=seed + i) for i in range(len(topics))]
        self._producers = [RawProducer({"bootstrap.servers": bootstrap}, t) for t in topics]
        self.rate = rate
        self.records = 0
        self.events = 0
        self.behind_s = 0.0
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self.started = time.monotonic()

    def next_id(self, table: int) -> int:
        """The next order id table `table`'s generator will use (every id below it was made)."""
        return int(self.shops[table]._next_id)   # the generator's counter: ids are handed out in order

    def stop(self) -> None:
        self._halt.set()
        self.join(120)
        for p in self._producers:
            p.flush(60)
        self.records = sum(p.count for p in self._producers)

    def run(self) -> None:
        try:
            self.started = time.monotonic()
            while not self._halt.is_set():
                due = int(self.rate * (time.monotonic() - self.started)) - self.events
                if due > 0:
                    per, extra = divmod(due, len(self.shops))
                    for i, (shop, producer) in enumerate(zip(self.shops, self._producers)):
                        for key, value in shop.events(per + (1 if i < extra else 0)):
                            producer.produce(key, value)
                        producer._producer.poll(0)
                    self.events += due
                self.records = sum(p.count for p in self._producers)
                lag = time.monotonic() - self.started - self.events / self.rate
                self.behind_s = max(self.behind_s, lag)
                self._halt.wait(max(0.0, self.STEP_S - lag) if lag < 1 else 0.0)
        except BaseException as e:  # noqa: BLE001 - reported by the bench
            self.error = e


# -- the consumer -------------------------------------------------------------------------------------------------
class PausedConsumer(threading.Thread):
    """`Table.read_changes(consumer_id=...)` of one table, in calls of at most `chunk` changes, paused from
    `pause_from` to `pause_to` seconds after `t0` (no read at all: only its recorded progress remains); keeps each
    key's last change (row kind, updated_at) to compare with the table at the end (`missed`)."""

    def __init__(self, table: Any, consumer_id: str, t0: float, pause_from: float, pause_to: float,
                 chunk: int = 5000) -> None:
        super().__init__(name="bench-consumer", daemon=True)
        self.table, self.consumer_id, self.t0 = table, consumer_id, t0
        self.pause_from, self.pause_to, self.chunk = pause_from, pause_to, chunk
        self.changes = 0
        self.reads = 0
        self.paused_s = 0.0
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._state: pa.Table | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                now = time.monotonic() - self.t0
                if self.pause_from <= now < self.pause_to:
                    began = time.monotonic()
                    self._halt.wait(min(0.5, self.pause_to - now))
                    self.paused_s += time.monotonic() - began
                    continue
                self.read_once(timeout_s=1.0)
        except BaseException as e:  # noqa: BLE001 - reported by the bench
            self.error = e

    def read_once(self, timeout_s: float) -> int:
        """One `read_changes` call with the consumer id (it resumes where the last one recorded); changes read."""
        n = 0
        for batch in self.table.read_changes(scan="full", consumer_id=self.consumer_id, max_records=self.chunk,
                                             timeout_s=timeout_s):
            self._keep(batch)
            n += batch.num_rows
        self.reads += 1
        self.changes += n
        return n

    def stop(self) -> None:
        self._halt.set()
        self.join(300)

    def drain(self, quiet_reads: int = 2) -> None:
        """Read until `quiet_reads` calls in a row find nothing (the ingest has stopped)."""
        quiet = 0
        while quiet < quiet_reads:
            quiet = quiet + 1 if self.read_once(timeout_s=3.0) == 0 else 0

    def _keep(self, batch: pa.RecordBatch) -> None:
        ts = batch.column(batch.schema.get_field_index("updated_at"))
        self._pending.append(pa.table({"order_id": batch.column(batch.schema.get_field_index("order_id")),
                                       "kind": batch.column(batch.schema.get_field_index(ROW_KIND_COLUMN)),
                                       "updated_at": pc.cast(ts, pa.int64())}))
        self._pending_rows += batch.num_rows
        if self._pending_rows > 200_000:
            self._reduce()

    def _reduce(self) -> pa.Table:
        """Each key's last change so far (the changes kept in the order they were read)."""
        parts = ([self._state] if self._state is not None else []) + self._pending
        if not parts:
            return pa.table({"order_id": pa.array([], pa.int64()), "kind": pa.array([], pa.string()),
                             "updated_at": pa.array([], pa.int64())})
        t = pa.concat_tables([p.cast(parts[0].schema) for p in parts])
        t = t.append_column("i", pa.array(range(t.num_rows), pa.int64()))
        last = t.group_by("order_id").aggregate([("i", "max")])
        self._state = t.take(last.column("i_max")).drop_columns(["i"])
        self._pending, self._pending_rows = [], 0
        return self._state

    def missed(self, final: pa.Table) -> dict[str, int]:
        """Against the table's final rows (order_id, updated_at): keys whose last change the consumer did not see
        (absent, older, or seen deleted), and keys it saw live that the table no longer has (a delete missed)."""
        state = self._reduce()
        seen = {k: (kind, ts) for k, kind, ts in zip(state.column("order_id").to_pylist(),
                                                    state.column("kind").to_pylist(),
                                                    state.column("updated_at").to_pylist())}
        rows = dict(zip(final.column("order_id").to_pylist(),
                        pc.cast(final.column("updated_at"), pa.int64()).to_pylist()))
        stale = sum(1 for k, ts in rows.items() if seen.get(k, ("", None))[0] not in ("+I", "+U")
                    or seen[k][1] != ts)
        deletes = sum(1 for k, (kind, _) in seen.items() if kind in ("+I", "+U") and k not in rows)
        return {"keys_in_table": len(rows), "keys_seen": len(seen), "stale_or_missing": stale,
                "deletes_missed": deletes, "missed": stale + deletes}


# -- the service process ----------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServiceProcess:
    """`tablestore service --warehouse W --detach` in a run directory of its own; its CPU (its process tree, from
    /proc) and RSS sampled; stopped with `tablestore service stop --dir`."""

    def __init__(self, warehouse: str, run_dir: Path, *, interval_s: float, expire_interval_s: float,
                 lease_timeout_s: float = 30.0) -> None:
        self.run_dir = run_dir
        self.port = free_port()
        cmd = [sys.executable, "-m", "tablestore.cli", "service", "--warehouse", warehouse, "--detach", "--dir",
               str(run_dir), "--port", str(self.port), "--interval", str(interval_s), "--expire-interval",
               str(expire_interval_s), "--lease-timeout", str(lease_timeout_s), "--output", "json"]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise SystemExit(f"tablestore service did not start: {done.stderr.strip() or done.stdout.strip()}")
        import json
        self.pid = int(json.loads(done.stdout)["pid"])
        self._last: tuple[float, float] | None = None

    def sample(self) -> dict[str, float | None]:
        """CPU% since the last sample (of one core) and RSS in MB now."""
        now, cpu = time.monotonic(), tree_cpu_s(self.pid)
        pct = None
        if self._last is not None and now > self._last[0]:
            pct = 100 * (cpu - self._last[1]) / (now - self._last[0])
        self._last = (now, cpu)
        rss = None
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
        except OSError:
            pass
        return {"cpu_pct": pct, "rss_mb": rss, "cpu_s": cpu}

    def errors(self) -> int:
        """Lines of its log that report a failed duty."""
        log = self.run_dir / "service.log"
        return sum(1 for line in log.read_text(errors="replace").splitlines() if " failed: " in line) \
            if log.exists() else 0

    def stop(self) -> None:
        subprocess.run([sys.executable, "-m", "tablestore.cli", "service", "stop", "--dir", str(self.run_dir)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
        try:   # gone, or a zombie nobody reaps (the detached service's parent exited)
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state != "Z":
            raise SystemExit(f"tablestore service pid {self.pid} still runs after `service stop`")


# -- one sample of a table ----------------------------------------------------------------------------------------
def sample_table(table: Any, next_id: int, rng: random.Random, reads: int) -> dict[str, Any]:
    """Sorted runs per bucket (max), snapshots kept and the latest id (DESCRIBE DETAIL); `reads` timed 1% key-range
    reads (`Table.read(filter=...)` over 1% of the ids made so far) and the freshness of each: read end minus the
    newest `updated_at` (the produce time the generator put in the row) among the rows read."""
    detail = table.describe()
    runs = [n for p in detail["partitions"] for n in p["sorted_runs"].values()]
    latest = detail["latest_snapshot"]
    out: dict[str, Any] = {"max_runs": max(runs, default=0), "snapshots": detail["snapshot_count"],
                           "snapshot_id": None if latest is None else latest["id"], "read_ms": [],
                           "freshness_s": [], "rows_read": 0}
    width = max(1, next_id // 100)
    for _ in range(reads):
        lo = rng.randrange(1, max(2, next_id - width))
        began = time.perf_counter()
        rows = table.read(columns=["order_id", "updated_at"],
                          filter=(pc.field("order_id") >= lo) & (pc.field("order_id") < lo + width))
        ended = time.time()
        out["read_ms"].append((time.perf_counter() - began) * 1000)
        out["rows_read"] += rows.num_rows
        if rows.num_rows:
            newest = pc.max(pc.cast(rows.column("updated_at"), pa.int64())).as_py()
            out["freshness_s"].append(ended - newest / 1e6)
    return out
