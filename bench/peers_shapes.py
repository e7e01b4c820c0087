"""The tables `bench/spark_peers.py` races the systems on (`--shape`), their data and the answers every read must give.

- `narrow4` (the default): `id BIGINT NOT NULL, a BIGINT, b DOUBLE, c STRING`, 2 buckets; at scale 1 a 5M-row bulk
  insert, 1M keys preloaded, then 10 upsert batches of 500k.
- `wide8`, the shape users have (issue 49, also `bench/spark_dv_bench.py`'s): `id` BIGINT key, two more BIGINTs, a
  DOUBLE, three STRINGs, a TIMESTAMP; 4 buckets; at scale 1 200k keys preloaded, then 10 upsert batches of 100k.
Both: 30% updates, 5% deletes, the rest new keys, as Parquet files with a column `op` (`+I`, `+U`, `-D`).

Each shape's reads (`READS`: SQL on `{t}`, into Spark's `noop` sink or collected and checked against `truth.json`):
a scan of every column, a SQL aggregate over every column, and the 1% key range.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# --- wide8: also bench/spark_dv_bench.py's shape ------------------------------------------------------------------
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int64()), ("b", pa.int64()), ("c", pa.float64()),
                    ("s1", pa.string()), ("s2", pa.string()), ("s3", pa.string()), ("ts", pa.timestamp("us", "UTC"))])
BASE_TS = int(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1_000_000)
AGGREGATE = ("SELECT count(*), sum(id), sum(a), sum(b), round(sum(c), 2), max(s1), max(s2), max(s3), max(ts) "
             "FROM {}")  # a double sum rounded: its last digits depend on the order of the rows


def rows(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    n = len(ids)
    a = rng.integers(0, 1 << 40, n)
    return pa.table({
        "id": ids, "a": a, "b": rng.integers(0, 1_000_000, n), "c": rng.random(n),
        "s1": pc.binary_join_element_wise("user-", pc.cast(pa.array(a % 100_000), pa.string()), ""),
        "s2": pc.cast(pa.array(a), pa.string()),
        "s3": pa.array(np.char.add("city-", (a % 500).astype(str))),
        "ts": pa.array(BASE_TS + rng.integers(0, 86_400_000_000 * 30, n), pa.timestamp("us", "UTC")),
    }, schema=SCHEMA)


def batches(keys: int, count: int, seed: int = 49) -> tuple[pa.Table, list[pa.Table]]:
    """`keys` rows, then `count` batches of `keys // 2` changes, each with a `_row_kind` column."""
    rng = np.random.default_rng(seed)
    init = rows(rng, np.arange(keys, dtype=np.int64))
    out, next_id, live = [], keys, np.arange(keys, dtype=np.int64)
    size = keys // 2
    for _ in range(count):
        updates = rng.choice(live, int(size * 0.30), replace=False)
        deletes = rng.choice(np.setdiff1d(live, updates), int(size * 0.05), replace=False)
        new = np.arange(next_id, next_id + size - len(updates) - len(deletes), dtype=np.int64)
        next_id += len(new)
        upserts = rows(rng, np.concatenate([updates, new]))
        upserts = upserts.append_column("_row_kind", pa.array(["+U"] * len(updates) + ["+I"] * len(new)))
        gone = rows(rng, deletes).append_column("_row_kind", pa.array(["-D"] * len(deletes)))
        out.append(pa.concat_tables([upserts, gone]))
        live = np.setdiff1d(np.concatenate([live, new]), deletes)
    return init, out


def _replay(init: pa.Table, changes: list[pa.Table]) -> pa.Table:
    """The live rows after `changes` (each key at most once per batch), in key order."""
    tables = [init, *(b.drop_columns(["_row_kind"]) for b in changes)]
    top = max(int(pc.max(t["id"]).as_py()) for t in tables) + 1
    where = np.full(top, -1, np.int64)   # each key's row in the concatenated tables, -1: none
    where[init["id"].to_numpy()] = np.arange(init.num_rows)
    offset = init.num_rows
    for b in changes:
        ids = b["id"].to_numpy()
        gone = pc.equal(b["_row_kind"], "-D").to_numpy(zero_copy_only=False)
        pos = np.arange(offset, offset + b.num_rows)
        where[ids[~gone]] = pos[~gone]
        where[ids[gone]] = -1
        offset += b.num_rows
    return pa.concat_tables(tables).take(pa.array(where[where >= 0]))


def _collected(value: Any) -> Any:
    """A collected value as `truth.json` holds it (a timestamp: microseconds since the epoch)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:   # PySpark gives the driver's local time
            value = value.astimezone()
        return round(value.timestamp() * 1_000_000)
    return value


def same(answer: Any, truth: list[Any]) -> bool:
    """A collected row against its truth: doubles to the 2 decimals the queries round them to."""
    got = [_collected(v) for v in answer]
    return len(got) == len(truth) and all(
        abs(g - t) <= 0.011 if isinstance(t, float) and g is not None else g == t for g, t in zip(got, truth))


# --- the shapes --------------------------------------------------------------------------------------------------
class Shape:
    key = ""
    ddl = ""
    bucket = 2
    bulk = False   # has a bulk-insert data set (and the narrow columns the streaming and latency workloads use)
    reads: dict[str, tuple[str, str]] = {}
    """Read name -> (SQL on `{t}` with `{lo}`/`{hi}`, "noop" or the truth.json key of its collected answer)."""

    @property
    def columns(self) -> str:
        return ", ".join(c.split()[0] for c in self.ddl.split(", "))

    def generate(self, into: Path, scale: float, seed: int) -> dict[str, Any]:
        raise NotImplementedError


def _write_batch(into: Path, i: int, batch: pa.Table) -> None:
    path = into / "batches" / f"batch-{i:02d}.parquet"
    pq.write_table(batch, path)
    # The streaming upserts read these files in modification-time order (Spark's file source, in ms), so each gets
    # its own second: small batches written within one millisecond came out of order.
    os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


class Narrow4(Shape):
    key = "narrow4"
    ddl = "id BIGINT NOT NULL, a BIGINT, b DOUBLE, c STRING"
    bulk = True
    reads = {"scan": ("SELECT id, a, b, c FROM {t}", "noop"),
             "aggregate": ("SELECT count(*), sum(id), sum(a), round(sum(b), 2), max(c) FROM {t}", "aggregate"),
             "1% key range": ("SELECT id, a, b, c FROM {t} WHERE id < {hi}", "noop")}

    @staticmethod
    def _rows(rng: np.random.Generator, ids: np.ndarray) -> dict[str, Any]:
        n = len(ids)
        return {"id": ids.astype(np.int64), "a": rng.integers(0, 1 << 20, n), "b": rng.random(n),
                "c": pa.array(np.char.add("v", (ids % 100_000).astype(str)))}

    def generate(self, into: Path, scale: float, seed: int) -> dict[str, Any]:
        rng = np.random.default_rng(seed)
        n_bulk, n_base, n_batch = int(5_000_000 * scale), int(1_000_000 * scale), int(500_000 * scale)
        bulk = pa.table(self._rows(rng, rng.permutation(n_bulk)))
        pq.write_table(bulk, into / "bulk.parquet")
        base_ids = rng.permutation(n_base)
        base = pa.table(self._rows(rng, base_ids))
        pq.write_table(base, into / "base.parquet")
        alive = np.zeros(n_base + 10 * n_batch, bool)
        alive[base_ids] = True
        next_id, changes = n_base, []
        for i in range(10):
            n_upd, n_del = int(n_batch * 0.30), int(n_batch * 0.05)
            touched = rng.choice(np.flatnonzero(alive), n_upd + n_del, replace=False)
            ins = np.arange(next_id, next_id + n_batch - n_upd - n_del)
            next_id += len(ins)
            ids = np.concatenate([touched, ins])
            order = rng.permutation(len(ids))
            op = np.array(["+U"] * n_upd + ["-D"] * n_del + ["+I"] * len(ins))
            batch = pa.table(self._rows(rng, ids)).append_column("op", pa.array(op)).take(pa.array(order))
            _write_batch(into, i, batch)
            changes.append(batch.rename_columns([*batch.column_names[:-1], "_row_kind"]))
            alive[touched[n_upd:]] = False
            alive[touched[:n_upd]] = alive[ins] = True
        final = _replay(base, changes)
        pq.write_table(final, into / "final.parquet")
        truth = _truth(final, self.reads, {"lo": 0, "hi": int(next_id * 0.01)}, 10 * n_batch)
        truth["bulk"] = [n_bulk, int(pc.sum(bulk["a"]).as_py())]
        (into / "truth.json").write_text(json.dumps(truth))
        return truth


class Wide8(Shape):
    key = "wide8"
    ddl = ("id BIGINT NOT NULL, a BIGINT, b BIGINT, c DOUBLE, s1 STRING, s2 STRING, s3 STRING, ts TIMESTAMP")
    bucket = 4
    reads = {"scan": ("SELECT id, a, b, c, s1, s2, s3, ts FROM {t}", "noop"),
             "aggregate": (AGGREGATE.format("{t}"), "aggregate"),
             "1% key range": ("SELECT count(*), sum(a) FROM {t} WHERE id BETWEEN {lo} AND {hi}", "range")}

    def generate(self, into: Path, scale: float, seed: int) -> dict[str, Any]:
        keys = int(200_000 * scale)
        init, changes = batches(keys, 10, seed=49 + seed)
        pq.write_table(init, into / "base.parquet")
        for i, b in enumerate(changes):
            _write_batch(into, i, b.rename_columns([*b.column_names[:-1], "op"]))
        final = _replay(init, changes)
        pq.write_table(final, into / "final.parquet")
        top = int(pc.max(final["id"]).as_py())
        bounds = {"lo": top // 2, "hi": top // 2 + top // 100}
        truth = _truth(final, self.reads, bounds, sum(b.num_rows for b in changes))
        (into / "truth.json").write_text(json.dumps(truth))
        return truth


def _truth(final: pa.Table, reads: dict[str, tuple[str, str]], bounds: dict[str, int], changes: int) -> dict[str, Any]:
    """Every answer the reads and checks must give, computed with pyarrow (the SQL's own aggregates)."""
    a = final["a"]
    in_range = final.filter(pc.and_(pc.greater_equal(final["id"], bounds["lo"]),
                                    pc.less(final["id"], bounds["hi"]) if reads["1% key range"][1] == "noop"
                                    else pc.less_equal(final["id"], bounds["hi"])))
    answers: dict[str, Any] = {"final": [final.num_rows, int(pc.sum(a).as_py())], "changes": changes,
                               "range": [in_range.num_rows, int(pc.sum(in_range["a"]).as_py() or 0)], **bounds}
    agg = [final.num_rows]
    for name in final.column_names:
        col = final[name]
        if pa.types.is_integer(col.type):
            agg.append(int(pc.sum(col).as_py()))
        elif pa.types.is_floating(col.type):
            agg.append(round(float(pc.sum(col).as_py()), 2))
        elif pa.types.is_timestamp(col.type):
            agg.append(int(pc.max(col.cast(pa.int64())).as_py()))
        else:
            agg.append(pc.max(col).as_py())
    answers["aggregate"] = agg
    return answers


SHAPES: dict[str, Shape] = {s.key: s for s in (Narrow4(), Wide8())}
