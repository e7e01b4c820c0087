"""Files written under an older schema read under the newest one (filestore.evolution), on every read path: the merge
by sequence number, the merge by run order (one integer key), a single run, filters pushed to old files or applied
after the cast, pruning on old files' statistics, compaction, a count table, and a handle older than the files."""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
from filestore import FileStore, SchemaMismatchError, ValueKind, compact
from filestore.merge import KIND, SEQ, merge

OLD = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("s", pa.string(), nullable=False),
                 pa.field("v", pa.int32()), pa.field("f", pa.float32()), pa.field("d", pa.decimal128(10, 2))])
WIDE = {"v": pa.int64(), "f": pa.float64(), "d": pa.decimal128(12, 2)}


def make(tmp: Path, key: list[str], bucket: int = 1) -> catalog.Catalog:
    cat = catalog.Catalog(str(tmp / "wh"))
    cat.create_database("db")
    cat.create_table("db.t", OLD if key else OLD.remove(0).insert(0, pa.field("k", pa.int64())), key or None,
                     None, {"bucket": str(bucket)})
    return cat


def commit(store: FileStore, rows: dict[str, list[object]], deletes: list[bool] | None = None) -> None:
    data = pa.table({n: pa.array(v, store.schema.arrow_schema.field(n).type) for n, v in rows.items()})
    kinds = None if deletes is None else np.array([int(ValueKind.DELETE if d else ValueKind.ADD) for d in deletes])
    w = store.new_write()
    w.write(data, kinds)
    store.new_commit().commit(w.prepare_commit(), identifier=1)


def evolve(cat: catalog.Catalog) -> FileStore:
    return cat.alter_table("db.t", add_columns=[pa.field("c", pa.string())], alter_column_types=WIDE).store


def old_rows(n: int) -> dict[str, list[object]]:
    return {"k": list(range(n)), "s": ["a"] * n, "v": [i * 10 for i in range(n)], "f": [0.5] * n,
            "d": [Decimal("1.25")] * n}


def reference(store: FileStore, filter: pc.Expression | None = None) -> pa.Table:
    """Every record of every split merged, then filtered: the definition of a read."""
    s = store.schema
    read = store.new_read()
    out = []
    for split in store.new_scan().plan(store.snapshots.latest()):
        merged = merge(read.read_records(split), s.key_columns, primary_key=s.has_primary_key, final=True)
        out.append(merged.select(s.arrow_schema.names).cast(s.arrow_schema))
    table = pa.concat_tables(out)
    return table if filter is None else table.filter(filter)


def sort(t: pa.Table) -> list[dict[str, object]]:
    return sorted(t.to_pylist(), key=lambda r: (r["k"], str(r.get("s")), str(r.get("c"))))


FILTERS = [pc.field("c") == "x", pc.field("c").is_null(), pc.field("v") > 2**35, pc.field("v") < 25,
           pc.field("f") > 0.6, pc.field("d") > Decimal("100.00"), pc.field("k") >= 3,
           (pc.field("c") == "x") | (pc.field("k") == 0)]


@pytest.mark.parametrize("key", [["k"], ["k", "s"]])   # merge by run order (one integer key) / by sequence number
def test_old_and_new_runs_merge_under_the_new_schema(tmp_path: Path, key: list[str]) -> None:
    cat = make(tmp_path, key)
    old = cat.get_table("db.t").store
    commit(old, old_rows(6))
    commit(old, {"k": [5], "s": ["a"], "v": [55], "f": [0.5], "d": [Decimal("5.00")]}, deletes=[True])
    store = evolve(cat)
    commit(store, {"k": [1, 2, 9], "s": ["a"] * 3, "v": [2**40, 7, 9], "f": [1e300, 0.25, 9.0],
                   "d": [Decimal("1234567890.12"), Decimal("0.01"), Decimal("9.99")], "c": ["x", None, "y"]})
    rows = sort(store.new_read().to_table(store.new_scan().plan(store.snapshots.latest())))
    assert [r["k"] for r in rows] == [0, 1, 2, 3, 4, 9]
    assert rows[0] == {"k": 0, "s": "a", "v": 0, "f": 0.5, "d": Decimal("1.25"), "c": None}
    assert rows[1] == {"k": 1, "s": "a", "v": 2**40, "f": 1e300, "d": Decimal("1234567890.12"), "c": "x"}
    assert rows == sort(reference(store))
    for f in FILTERS:
        planned = store.new_scan().plan(store.snapshots.latest(), f)
        assert sort(store.new_read(None, f).to_table(planned)) == sort(reference(store, f)), f
    # the old handle (schema 0) still reads: the newer columns left out, widened values back in its types
    with pytest.raises(SchemaMismatchError, match="load the table again"):
        old.new_read().to_table(old.new_scan().plan(old.snapshots.latest()))
    commit(store, {"k": [1], "s": ["a"], "v": [1], "f": [0.5], "d": [Decimal("1")], "c": ["z"]})
    projected = sort(old.new_read().to_table(old.new_scan().plan(old.snapshots.latest())))
    assert projected[1] == {"k": 1, "s": "a", "v": 1, "f": 0.5, "d": Decimal("1.00")}


def test_single_old_run_and_plain_files(tmp_path: Path) -> None:
    cat = make(tmp_path, ["k"])
    commit(cat.get_table("db.t").store, old_rows(4))
    store = evolve(cat)
    (split,) = store.new_scan().plan(store.snapshots.latest())
    read = store.new_read()
    assert read.single_run(split) and read.plain_files(split) is None   # Spark's own reader would miss column c
    table = read.read(split)
    assert table.schema == store.schema.arrow_schema and table.column("c").null_count == 4
    assert table.column("v").to_pylist() == [0, 10, 20, 30]
    assert store.new_read(["c", "k"], pc.field("c").is_null()).read(split).num_rows == 4
    messages = compact(store.context, store.snapshots.latest(), full=True)
    assert {f.schema_id for m in messages for f in m.added} == {store.schema.id}
    store.new_commit().commit(messages, identifier=2)
    (split,) = store.new_scan().plan(store.snapshots.latest())
    assert store.new_read().plain_files(split) is not None    # rewritten under the new schema
    assert sort(store.new_read().read(split)) == sort(table)


def test_options_change_keeps_files_plain(tmp_path: Path) -> None:
    cat = make(tmp_path, ["k"])
    commit(cat.get_table("db.t").store, old_rows(4))
    store = cat.alter_table_options("db.t", {"write-only": "true"}).store   # a new schema id, the same columns
    (split,) = store.new_scan().plan(store.snapshots.latest())
    assert store.schema.id == 1 and store.new_read().plain_files(split) is not None


def test_pruning_on_old_files_statistics(tmp_path: Path) -> None:
    """A table without a primary key prunes on every column: an old file holds no value of an added column (all
    null) and its widened column's statistics are compared after the cast (an added column of such a table may
    widen; the columns it was created with are its bucket key); nothing is pruned wrongly."""
    cat = make(tmp_path, [])
    store = cat.alter_table("db.t", add_columns=[pa.field("w", pa.int32())]).store
    commit(store, {**old_rows(5), "w": [1, 2, 3, 4, 2**31 - 1]})
    store = cat.alter_table("db.t", add_columns=[pa.field("c", pa.string())],
                            alter_column_types={"w": pa.int64()}).store
    commit(store, {**{n: v[:1] for n, v in old_rows(1).items()}, "w": [2**40], "c": ["x"]})
    snapshot = store.snapshots.latest()

    def files(f: pc.Expression) -> int:
        return sum(len(s.files) for s in store.new_scan().plan(snapshot, f))

    assert files(pc.field("c") == "x") == 1 and files(pc.field("c").is_null()) == 1
    assert files(pc.field("w") > 2**35) == 1 and files(pc.field("w") <= 40) == 1
    assert files(pc.field("w") == 2**31 - 1) == 1 and files(pc.field("k") >= 0) == 2
    for f in [*FILTERS, pc.field("w") > 2**35, pc.field("w") == 2**31 - 1, pc.field("w") < 3]:
        planned = store.new_scan().plan(snapshot, f)
        assert sort(store.new_read(None, f).to_table(planned)) == sort(reference(store, f)), f


def test_count_table_retracts_old_rows_after_a_column_is_added(tmp_path: Path) -> None:
    """Without a primary key the key is the whole row: an old row reads with null in the added column, so a -D of
    that row (null in it) after the change removes it, in the bucket it was written to (the bucket key stays the
    columns the table was created with), also through compaction."""
    cat = make(tmp_path, [], bucket=4)
    commit(cat.get_table("db.t").store, old_rows(8))
    store = cat.alter_table("db.t", add_columns=[pa.field("c", pa.string())]).store
    assert store.schema.bucket_key_columns == tuple(OLD.names)
    retract = {**{n: v[:4] for n, v in old_rows(8).items()}, "c": [None] * 4}
    commit(store, retract, deletes=[True] * 4)
    commit(store, {**{n: v[:1] for n, v in old_rows(8).items()}, "c": ["new"]})   # another row: c differs
    rows = sort(store.new_read().to_table(store.new_scan().plan(store.snapshots.latest())))
    assert [(r["k"], r["c"]) for r in rows] == [(0, "new"), (4, None), (5, None), (6, None), (7, None)]
    store.new_commit().commit(compact(store.context, store.snapshots.latest(), full=True), identifier=3)
    again = sort(store.new_read().to_table(store.new_scan().plan(store.snapshots.latest())))
    assert again == rows


def test_stale_handle_compaction_writes_the_newest_schema(tmp_path: Path) -> None:
    """A handle loaded before the change compacts files written after it: the output is of the newest schema (no
    column dropped, no value narrowed)."""
    cat = make(tmp_path, ["k"])
    old = cat.get_table("db.t").store
    commit(old, old_rows(3))
    store = evolve(cat)
    commit(store, {"k": [1], "s": ["a"], "v": [2**40], "f": [1.0], "d": [Decimal("1")], "c": ["x"]})
    messages = compact(old.context, old.snapshots.latest(), full=True)
    assert {f.schema_id for m in messages for f in m.added} == {store.schema.id}
    old.new_commit().commit(messages, identifier=5)
    rows = sort(store.new_read().to_table(store.new_scan().plan(store.snapshots.latest())))
    assert rows[1] == {"k": 1, "s": "a", "v": 2**40, "f": 1.0, "d": Decimal("1.00"), "c": "x"}


def test_missing_nullable_column_is_null_missing_required_is_an_error(tmp_path: Path) -> None:
    store = evolve(make(tmp_path, ["k"]))
    w = store.new_write()
    conformed = w.conform(pa.table({"k": [1], "s": ["a"]}))
    assert conformed.schema == store.schema.arrow_schema and conformed.column("c").to_pylist() == [None]
    with pytest.raises(SchemaMismatchError, match=r"input lacks columns \['s'\]"):
        w.conform(pa.table({"k": [1], "v": [1]}))


def test_records_keep_system_columns(tmp_path: Path) -> None:
    cat = make(tmp_path, ["k"])
    commit(cat.get_table("db.t").store, old_rows(2))
    store = evolve(cat)
    (split,) = store.new_scan().plan(store.snapshots.latest())
    records = store.new_read().read_records(split)
    assert records.column_names[:2] == [SEQ, KIND] and records.column("c").null_count == 2
