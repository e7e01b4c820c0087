"""`Table.merge` (MERGE INTO from the Python API, tablestore/merge.py) against a dict replay of Spark's MERGE semantics:
every clause kind in random combinations (hypothesis), the changes written (-U/+U, -D, +I), a target row matched
twice, the refused statements, a concurrent commit between the merge's read and its commit (ConcurrentUpdateError,
nothing committed, a re-run succeeds; commits to other buckets pass), and the changelog the table's log gets."""
from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tablestore
from tablestore.merge_plan import Clause, MergeTarget, conform_source, plan_changes

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False), ("v", pa.string()),
                    ("n", pa.int32())])
SOURCE = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string()), ("n", pa.int64()),
                    ("op", pa.string())])
Key = tuple[int, str]
Row = tuple[int, str, str | None, int | None]          # id, dt, v, n
Src = tuple[int, str, str | None, int | None, str | None]   # id, dt, v, n, op
Change = tuple[str, int, str, str | None, int | None]
_names = itertools.count()


def _catalog(root: Path) -> tablestore.Catalog:
    cat = tablestore.Catalog(str(root))
    cat.create_database("db", ignore_if_exists=True)
    return cat


def _table(cat: tablestore.Catalog, **options: str) -> tablestore.Table:
    return cat.create_table(f"db.t{next(_names)}", SCHEMA, primary_key=["id", "dt"], partition_by=["dt"],
                            options={"bucket": "2", "write-only": "true", **options})   # no COMPACT snapshots


def _rows(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA)


def _source(rows: list[Src]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SOURCE.names, r)) for r in rows], schema=SOURCE)


def _state(t: tablestore.Table) -> dict[Key, Row]:
    return {(r["id"], r["dt"]): (r["id"], r["dt"], r["v"], r["n"]) for r in t.read().to_pylist()}


# -- the clauses, each as builder call and as the replay's rule ------------------------------------------
# (when, builder step, the replay's predicate on (target row or None, source row or None), the new row or None)
Template = tuple[str, Callable[[tablestore.TableMerger], tablestore.TableMerger],
                 Callable[[Row | None, Src | None], bool], Callable[[Row | None, Src | None], Row | None]]


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


MATCHED: dict[str, Template] = {
    "delete if s.op = d": ("matched", lambda m: m.when_matched_delete(pc.field("s.op") == "d"),
                           lambda t, s: s[4] == "d", lambda t, s: None),
    "n += s.n, v = s.v if t.n > 4": (
        "matched", lambda m: m.when_matched_update({"n": pc.field("t.n") + pc.field("s.n"), "v": "s.v"},
                                                   pc.field("t.n") > 4),
        lambda t, s: t[3] is not None and t[3] > 4, lambda t, s: (t[0], t[1], s[2], _add(t[3], s[3]))),
    "update all": ("matched", lambda m: m.when_matched_update_all(), lambda t, s: True,
                   lambda t, s: (t[0], t[1], s[2], s[3])),
    "update all but v if s.n > 3": (
        "matched", lambda m: m.when_matched_update_all(pc.field("s.n") > 3, except_cols=["v"]),
        lambda t, s: s[3] is not None and s[3] > 3, lambda t, s: (t[0], t[1], t[2], s[3])),
    "delete": ("matched", lambda m: m.when_matched_delete(), lambda t, s: True, lambda t, s: None),
}
NOT_MATCHED: dict[str, Template] = {
    "insert all if s.n >= 2": ("not_matched", lambda m: m.when_not_matched_insert_all(pc.field("s.n") >= 2),
                               lambda t, s: s[3] is not None and s[3] >= 2, lambda t, s: (s[0], s[1], s[2], s[3])),
    "insert (new, 2 * s.n)": (
        "not_matched", lambda m: m.when_not_matched_insert(
            {"id": "s.id", "dt": "s.dt", "v": pc.scalar("new"), "n": pc.field("s.n") * 2}),
        lambda t, s: True, lambda t, s: (s[0], s[1], "new", None if s[3] is None else 2 * s[3])),
    "insert all but n": ("not_matched", lambda m: m.when_not_matched_insert_all(except_cols=["n"]),
                         lambda t, s: True, lambda t, s: (s[0], s[1], s[2], None)),
}
BY_SOURCE: dict[str, Template] = {
    "delete if t.n < 3": ("not_matched_by_source",
                          lambda m: m.when_not_matched_by_source_delete(pc.field("t.n") < 3),
                          lambda t, s: t[3] is not None and t[3] < 3, lambda t, s: None),
    "v = gone": ("not_matched_by_source",
                 lambda m: m.when_not_matched_by_source_update({"v": pc.scalar("gone")}),
                 lambda t, s: True, lambda t, s: (t[0], t[1], "gone", t[3])),
    "delete": ("not_matched_by_source", lambda m: m.when_not_matched_by_source_delete(),
               lambda t, s: True, lambda t, s: None),
}


def replay(state: dict[Key, Row], source: list[Src], templates: list[Template]
           ) -> tuple[dict[Key, Row], list[Change], tuple[int, int, int]] | Key:
    """Spark's MERGE on a dict: the state after, the changes as written, (updated, deleted, inserted); or the key
    of the first source row matching a target row that more than one source row matches (with a WHEN MATCHED
    clause)."""
    by_kind = {w: [tp for tp in templates if tp[0] == w] for w in ("matched", "not_matched", "not_matched_by_source")}
    matched_keys = [(s[0], s[1]) for s in source if (s[0], s[1]) in state]
    twice = [k for k in matched_keys if matched_keys.count(k) > 1]   # in source order
    if by_kind["matched"] and twice:
        return twice[0]
    after, updates, deletes, inserts = dict(state), [], [], []
    for s in source:
        key = (s[0], s[1])
        t = state.get(key)
        for _, _, holds, new in by_kind["matched" if t is not None else "not_matched"]:
            if holds(t, s):
                row = new(t, s)
                if t is None:
                    inserts.append(("+I", *row))                        # type: ignore[misc]
                    after[key] = row                                      # type: ignore[assignment]
                elif row is None:
                    deletes.append(("-D", *t))
                    after.pop(key)
                else:
                    updates += [("-U", *t), ("+U", *row)]
                    after[key] = row
                break
    sourced = {(s[0], s[1]) for s in source}
    for key, t in state.items():
        if key in sourced:
            continue
        for _, _, holds, new in by_kind["not_matched_by_source"]:
            if holds(t, None):
                row = new(t, None)
                if row is None:
                    deletes.append(("-D", *t))
                    after.pop(key)
                else:
                    updates += [("-U", *t), ("+U", *row)]
                    after[key] = row
                break
    return after, updates + deletes + inserts, (len(updates) // 2, len(deletes), len(inserts))


def normalized(changes: list[Change]) -> list[Change]:
    """What a diff of the two snapshots shows of `changes` (latest_changes): no unchanged update, the last +I of a
    key."""
    out: list[Change] = []
    pairs = iter(changes)
    last_insert: dict[Key, Change] = {}
    for c in pairs:
        if c[0] == "-U":
            new = next(pairs)
            if c[1:] != new[1:]:
                out += [c, new]
        elif c[0] == "+I":
            last_insert[(c[1], c[2])] = c
        else:
            out.append(c)
    return sorted(out + list(last_insert.values()), key=repr)


def _merger(t: tablestore.Table, source: pa.Table, templates: list[Template]) -> tablestore.TableMerger:
    m = t.merge(source)
    for _, step, _, _ in templates:
        m = step(m)
    return m


keys = st.tuples(st.integers(0, 7), st.sampled_from(["a", "b"]))
values = st.tuples(st.one_of(st.none(), st.sampled_from(["x", "y", "z"])), st.one_of(st.none(), st.integers(0, 9)))
ops = st.one_of(st.none(), st.sampled_from(["u", "d"]))
clause_lists = st.tuples(*(st.lists(st.sampled_from(sorted(group)), max_size=3, unique=True)
                           for group in (MATCHED, NOT_MATCHED, BY_SOURCE))).filter(lambda lists: any(lists))


@settings(max_examples=100, deadline=None)
@given(initial=st.dictionaries(keys, values, max_size=10), source=st.lists(st.tuples(keys, values, ops), max_size=8),
       chosen=clause_lists)
def test_merge_matches_the_dict_replay(tmp_path_factory: pytest.TempPathFactory, initial: dict[Key, Any],
                                       source: list[Any], chosen: tuple[list[str], ...]) -> None:
    t = _table(_catalog(tmp_path_factory.mktemp("wh")))
    state = {k: (*k, *v) for k, v in initial.items()}
    if state:
        t.write(_rows(list(state.values())))
    src: list[Src] = [(*k, *v, op) for k, v, op in source]
    templates = [group[name] for group, names in zip((MATCHED, NOT_MATCHED, BY_SOURCE), chosen) for name in names]
    expected = replay(state, src, templates)
    before = t.latest_snapshot_id()
    if not isinstance(expected[0], dict):   # a target row matched twice
        with pytest.raises(tablestore.MergeError, match=f"the target row with key id={expected[0]}, "
                                                         f"dt={expected[1]} is matched by more than one source row"):
            _merger(t, _source(src), templates).execute()
        assert t.latest_snapshot_id() == before and _state(t) == state
        return
    after, changes, (updated, deleted, inserted) = expected     # type: ignore[misc]
    result = _merger(t, _source(src), templates).execute()
    assert (result.num_target_rows_updated, result.num_target_rows_deleted, result.num_target_rows_inserted,
            result.num_source_rows) == (updated, deleted, inserted, len(src))
    assert _state(t) == after
    assert result.snapshot_id == (None if not changes else t.latest_snapshot_id())
    if changes:   # one snapshot, whose changes are the merge's
        assert result.snapshot_id == (before or 0) + 1
        latest = t.system_table("latest_changes").to_pylist()
        shown = sorted(((r["_row_kind"], r["id"], r["dt"], r["v"], r["n"]) for r in latest), key=repr)
        assert shown == normalized(changes)


@settings(max_examples=100, deadline=None)
@given(initial=st.dictionaries(keys, values, max_size=10), source=st.lists(st.tuples(keys, values, ops), max_size=8),
       chosen=clause_lists)
def test_the_planned_changelog_is_the_replays(initial: dict[Key, Any], source: list[Any],
                                               chosen: tuple[list[str], ...]) -> None:
    """What the merge writes (and the log gets): -U old then +U new per updated row (unchanged ones included),
    -D old per deleted row, +I per inserted row in source order."""
    state = {k: (*k, *v) for k, v in initial.items()}
    src: list[Src] = [(*k, *v, op) for k, v, op in source]
    templates = [group[name] for group, names in zip((MATCHED, NOT_MATCHED, BY_SOURCE), chosen) for name in names]
    expected = replay(state, src, templates)
    if not isinstance(expected[0], dict):
        return
    target = MergeTarget("db.t", SCHEMA, ("id", "dt"))
    clauses = [step(tablestore.TableMerger(target, None, _source([]))).clauses[0]  # type: ignore[arg-type]
               for _, step, _, _ in templates]
    planned = plan_changes(target, _rows(list(state.values())), conform_source(target, _source(src)), clauses,
                           target_alias="t", source_alias="s")
    got = [(r["_row_kind"], r["id"], r["dt"], r["v"], r["n"]) for r in planned.changes.to_pylist()]
    changes = expected[1]                                       # type: ignore[misc]
    pairs = [tuple(got[i:i + 2]) for i in range(0, len(got), 2) if got[i][0] == "-U"]
    assert all(a[0] == "-U" and b[0] == "+U" and a[1:3] == b[1:3] for a, b in pairs)   # adjacent, one key
    assert sorted(got, key=repr) == sorted(changes, key=repr)
    assert [c for c in got if c[0] == "+I"] == [c for c in changes if c[0] == "+I"]      # source order


def test_every_clause_kind_in_one_merge(tmp_path: Path) -> None:
    t = _table(_catalog(tmp_path))
    t.write(_rows([(1, "a", "x", 1), (2, "a", "y", 60), (3, "b", "z", 3), (4, "b", "w", 4), (5, "b", "q", 1)]))
    source = _source([(1, "a", "X", 10, "u"), (2, "a", "Y", 20, "u"), (3, "b", "Z", 30, "d"), (9, "b", "N", 40, "i")])
    result = (t.merge(source)
              .when_matched_delete(pc.field("s.op") == "d")
              .when_matched_update({"n": pc.field("t.n") + pc.field("s.n"), "v": "s.v"}, pc.field("t.n") > 50)
              .when_matched_update_all()
              .when_not_matched_insert_all()
              .when_not_matched_by_source_delete(pc.field("t.n") < 2)
              .when_not_matched_by_source_update({"v": pc.scalar("gone")})
              .execute())
    assert result == tablestore.MergeResult(2, 4, 3, 2, 1)
    assert _state(t) == {(1, "a"): (1, "a", "X", 10), (2, "a"): (2, "a", "Y", 80), (4, "b"): (4, "b", "gone", 4),
                         (9, "b"): (9, "b", "N", 40)}
    assert len(t.snapshots()) == 2


def test_duplicate_source_keys_are_inserted_when_nothing_matches_them(tmp_path: Path) -> None:
    t = _table(_catalog(tmp_path))
    t.write(_rows([(1, "a", "x", 1)]))
    source = _source([(1, "a", "p", 1, None), (1, "a", "q", 2, None), (7, "a", "first", 1, None),
                      (7, "a", "second", 2, None)])
    result = t.merge(source).when_not_matched_insert_all().execute()   # no WHEN MATCHED: key 1 is not checked
    assert result.num_target_rows_inserted == 2
    assert _state(t) == {(1, "a"): (1, "a", "x", 1), (7, "a"): (7, "a", "second", 2)}   # the later row wins
    with pytest.raises(tablestore.MergeError,
                       match=r"key id=1, dt=a is matched by more than one source row.*\(2 target row"):
        t.merge(source).when_matched_update_all().when_not_matched_insert_all().execute()
    assert len(t.snapshots()) == 2


@pytest.mark.parametrize("build,message", [
    (lambda m: m.when_matched_update({"id": pc.field("s.id") + 1}),
     r"sets the primary-key column\(s\) \['id'\]: a primary key is not updated in place"),
    (lambda m: m.when_matched_update({"nope": 1}), r"sets \['nope'\], which are not columns of the table"),
    (lambda m: m.when_matched_update({"v": "s.nope"}), r"no field 's.nope' in a joined row \(t.id, t.dt, t.v, t.n, "
                                                       r"s.id, s.dt, s.v, s.n, s.op"),
    (lambda m: m.when_matched_delete(pc.field("s.nope") == 1), r"WHEN MATCHED DELETE .*No match for FieldRef"),
    (lambda m: m.when_matched_delete(pc.field("s.n")), r"the predicate is of type int64, not boolean"),
    (lambda m: m.when_not_matched_insert({"id": "s.id", "v": "s.v"}),
     r"does not set the primary-key column\(s\) \['dt'\]"),
    (lambda m: m, r"no WHEN clause"),
])
def test_a_clause_that_cannot_apply_is_an_error_naming_the_table(tmp_path: Path, build: Any, message: str) -> None:
    t = _table(_catalog(tmp_path))
    t.write(_rows([(1, "a", "x", 1)]))
    with pytest.raises(tablestore.MergeError, match=f"^MERGE INTO {t.name}: .*{message}"):
        build(t.merge(_source([(1, "a", "y", 2, "u")]))).execute()
    assert len(t.snapshots()) == 1


def test_tables_and_sources_a_merge_refuses(tmp_path: Path) -> None:
    cat = _catalog(tmp_path)
    plain = cat.create_table("db.plain", SCHEMA)
    with pytest.raises(tablestore.MergeError, match="it has no primary key"):
        plain.merge(_source([]))
    partial = _table(cat, **{"merge-engine": "partial-update"})
    with pytest.raises(tablestore.MergeError, match="its merge-engine is partial-update"):
        partial.merge(_source([]))
    t = _table(cat)
    with pytest.raises(tablestore.MergeError, match=r"the source lacks the primary-key column\(s\) \['dt'\]"):
        t.merge(pa.table({"id": [1]})).when_matched_delete().execute()
    with pytest.raises(tablestore.MergeError, match=r"the source lacks the column\(s\) \['n'\] it takes"):
        t.merge(pa.table({"id": [1], "dt": ["a"], "v": ["x"]})).when_not_matched_insert_all().execute()
    with pytest.raises(tablestore.SchemaMismatchError, match="column 'v' has type int64, the table's type is string"):
        t.merge(pa.table({"id": [1], "dt": ["a"], "v": [5], "n": [1]})).when_not_matched_insert_all().execute()
    with pytest.raises(tablestore.InvalidWriteError, match="primary-key column 'id' has nulls"):
        null_key = _source([(None, "a", "x", 1, None)])   # type: ignore[list-item]
        t.merge(null_key).when_not_matched_insert_all().execute()
    assert t.snapshots() == []
    first = t.merge(_source([(1, "a", "x", 1, None)])).when_not_matched_insert_all().execute()   # the empty table
    assert first.snapshot_id == 1 and _state(t) == {(1, "a"): (1, "a", "x", 1)}


def _racing(t: tablestore.Table, merger: tablestore.TableMerger, commit: Callable[[], object]
            ) -> tablestore.TableMerger:
    """`merger`, with `commit` run right after its read of the target (another writer's commit in between)."""
    def read(**kw: Any) -> pa.Table:
        rows = t.read(**kw)
        commit()
        return rows
    return dataclasses.replace(merger, io=dataclasses.replace(merger.io, read=read))


def test_a_concurrent_commit_to_a_bucket_the_merge_writes_fails_it_cleanly(tmp_path: Path) -> None:
    cat = _catalog(tmp_path)
    t = _table(cat)
    t.write(_rows([(1, "a", "x", 1), (2, "b", "y", 2)]))
    other = cat.get_table(t.name)   # another writer
    merge = t.merge(_source([(1, "a", "X", 10, None)])).when_matched_update({"n": pc.field("t.n") + pc.field("s.n")})
    with pytest.raises(tablestore.ConcurrentUpdateError, match=r"snapshot 2 changed bucket\(s\) a:\d since snapshot 1"
                                                              r", which this write's rows were read from; nothing was "
                                                              "committed") as e:
        _racing(t, merge, lambda: other.write(_rows([(1, "a", "x", 5)]))).execute()   # the row it read changed
    assert isinstance(e.value, tablestore.CommitConflictError)
    assert len(t.snapshots()) == 2 and _state(t)[(1, "a")] == (1, "a", "x", 5)   # the other writer's update stays
    orphans = t.remove_orphan_files(older_than=dt.timedelta(0))
    assert [p for p in orphans if p.endswith(".parquet")] == []   # the merge's files were deleted
    assert merge.execute().snapshot_id == 3   # run again: it reads the latest snapshot
    assert _state(t)[(1, "a")] == (1, "a", "x", 15)


def test_concurrent_commits_elsewhere_do_not_fail_a_merge(tmp_path: Path) -> None:
    cat = _catalog(tmp_path)
    t = _table(cat)
    t.write(_rows([(1, "a", "x", 1), (2, "b", "y", 2)]))
    other = cat.get_table(t.name)
    merge = t.merge(_source([(1, "a", "X", 10, None)])).when_matched_update_all()
    result = _racing(t, merge, lambda: (other.write(_rows([(2, "b", "z", 3)])), other.compact(full=True))).execute()
    assert result.snapshot_id == 4   # the other partition's write and a compaction came in between
    assert _state(t) == {(1, "a"): (1, "a", "X", 10), (2, "b"): (2, "b", "z", 3)}


@pytest.mark.kafka
def test_the_log_gets_the_merges_changelog(tmp_path: Path, kafka_bootstrap: str) -> None:
    from log_helpers import drop_created_tables, kafka_catalog

    try:
        t = _table(kafka_catalog(tmp_path, kafka_bootstrap), **{"log.changelog-mode": "all"})   # -U stored
        t.write(_rows([(1, "a", "x", 1), (2, "a", "y", 2), (3, "a", "z", 3)]))
        time.sleep(0.01)
        since = int(time.time() * 1000)
        source = _source([(1, "a", "X", 10, None), (2, "a", None, None, "d"), (3, "a", "z", 3, None),
                          (4, "a", "new", 4, None)])
        (t.merge(source).when_matched_delete(pc.field("s.op") == "d").when_matched_update_all()
         .when_not_matched_insert_all().execute())

        def changes(normalize: bool) -> list[Change]:
            return [(r["_row_kind"], r["id"], r["dt"], r["v"], r["n"]) for b in t.read_changes(
                scan="from-timestamp", timestamp_ms=since, timeout_s=1.0, normalize=normalize) for r in b.to_pylist()]

        def signed(changes: list[Change]) -> list[tuple[Any, ...]]:   # retraction or addition (the log format's kinds)
            return sorted(((c[0][0], *c[1:]) for c in changes), key=repr)

        assert signed(changes(False)) == signed([   # the records as written: the unchanged row 3 too
            ("-U", 1, "a", "x", 1), ("+U", 1, "a", "X", 10), ("-D", 2, "a", "y", 2), ("-U", 3, "a", "z", 3),
            ("+U", 3, "a", "z", 3), ("+I", 4, "a", "new", 4)])
        assert sorted(changes(True), key=repr) == sorted([
            ("-U", 1, "a", "x", 1), ("+U", 1, "a", "X", 10), ("-D", 2, "a", "y", 2), ("+I", 4, "a", "new", 4)],
            key=repr)
    finally:
        drop_created_tables()
