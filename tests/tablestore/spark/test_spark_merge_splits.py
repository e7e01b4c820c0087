"""A bucket of several sorted runs of a deduplicating table is merged in the JVM (read/MergeSplits.java): against a
plain dict replay of the same changes, through SQL and `format("managed")`, whole, by key range, by a value filter
and with the key columns pruned, for integer, string and composite keys (the key codec's order: negative integers,
strings compared by their UTF-8 bytes, prefixes)."""
from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pytest

import tablestore

pytestmark = pytest.mark.spark

_names = itertools.count()
WORDS = ["", "a", "a\x00", "ab", "abc", "Z", "z", "é", "ä", "ü", "日本", "\U0001F600", "b", "ba", "a b", "A"]


def _int_key(rng: random.Random) -> tuple[Any, ...]:
    return (rng.randint(-300, 300),)


def _string_key(rng: random.Random) -> tuple[Any, ...]:
    return (rng.choice(WORDS) + rng.choice(WORDS) + rng.choice(["", "x", "é"]),)


def _composite_key(rng: random.Random) -> tuple[Any, ...]:
    return (rng.randint(-20, 20), rng.choice(WORDS))


KEYS: dict[str, tuple[list[pa.Field], Callable[[random.Random], tuple[Any, ...]]]] = {
    "int64": ([pa.field("k", pa.int64(), False)], _int_key),
    "string": ([pa.field("k", pa.string(), False)], _string_key),
    "int32+string": ([pa.field("k", pa.int32(), False), pa.field("k2", pa.string(), False)], _composite_key),
}


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("key", list(KEYS))
def test_merged_buckets_read_what_a_dict_replay_of_the_changes_gives(
        spark: Any, spark_warehouse: Path, key: str, seed: int) -> None:
    fields, draw = KEYS[key]
    keys = [f.name for f in fields]
    schema = pa.schema([*fields, pa.field("p", pa.string(), False), ("v", pa.int64()), ("note", pa.string())])
    catalog = tablestore.Catalog(str(spark_warehouse))
    catalog.create_database("ms", ignore_if_exists=True)
    table = catalog.create_table(f"ms.t{next(_names)}", schema, primary_key=[*keys, "p"], partition_by=["p"],
                                 options={"bucket": "2", "write-only": "true"})
    rng = random.Random(seed)
    truth: dict[tuple[Any, ...], dict[str, Any]] = {}
    for commit in range(6):
        changes: dict[tuple[Any, ...], dict[str, Any]] = {}
        for _ in range(rng.randint(1, 120)):
            k = (*draw(rng), rng.choice(["x", "y"]))
            row = {**dict(zip([*keys, "p"], k)), "v": rng.randint(-10**6, 10**6),
                   "note": rng.choice([None, "n", "note é"])}
            # the first commit deletes keys that are not there: a bucket of one run holding deletes
            kind = "-D" if rng.random() < (0.3 if commit == 0 else 0.2) else "+U"
            changes[k] = {"_row_kind": kind, **row}
        for k, change in changes.items():
            if change["_row_kind"] == "-D":
                truth.pop(k, None)
            else:
                truth[k] = {c: change[c] for c in schema.names}
        table.write(pa.Table.from_pylist(list(changes.values()),
                                         schema=pa.schema([("_row_kind", pa.string()), *schema])))
        if commit == 3:
            table.compact()   # some runs above level 0 beside the newer level-0 ones
    columns = [*keys, "p", "v", "note"]

    def rows(where: Callable[[dict[str, Any]], bool]) -> list[tuple[Any, ...]]:
        return sorted((tuple(r[c] for c in columns) for r in truth.values() if where(r)), key=repr)

    def got(df: Any) -> list[tuple[Any, ...]]:
        return sorted((tuple(r) for r in df.select(*columns).collect()), key=repr)

    sql = spark.table(f"managed.{table.name}")
    assert "merged in the JVM" in _plan(sql) and "(0 raw splits, 0 merged" not in _plan(sql)
    assert got(sql) == rows(lambda r: True)
    assert got(spark.read.format("managed").load(table.name)) == rows(lambda r: True)
    low = sorted(truth)[len(truth) // 3][0] if truth else 0
    ranged = sql.filter(sql[keys[0]] < low) if truth else sql
    assert got(ranged) == rows(lambda r: r[keys[0]] < low)
    assert got(sql.filter("v > 0 AND note IS NOT NULL")) == rows(lambda r: r["v"] > 0 and r["note"] is not None)
    # the keys not read: the merge reads them all the same
    values = spark.sql(f"SELECT v, note FROM managed.{table.name} WHERE p = 'x'").collect()
    assert sorted((tuple(r) for r in values), key=repr) == sorted(
        ((r["v"], r["note"]) for r in truth.values() if r["p"] == "x"), key=repr)
