"""Unchanged values in a changelog (filestore/unchanged.py): a CDC source's placeholder for a value it does not have
(Debezium's `__debezium_unavailable_value` for an unchanged TOASTed PostgreSQL column) never reaches a file, a read or
the log; the key's stored value is kept. Oracle: a dict replay in which a placeholder keeps the previous value."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore
from filestore.unchanged import placeholder_of, unchanged_cells

P = "__debezium_unavailable_value"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("vip", pa.bool_()), ("big", pa.string()),
                    ("raw", pa.binary()), ("tags", pa.list_(pa.string())), ("nums", pa.list_(pa.int32()))])
CHANGELOG = SCHEMA.append(pa.field("_row_kind", pa.string()))
PLACEHOLDERS = {"big": P, "raw": P.encode(), "tags": [P], "nums": list(P.encode())}


@pytest.fixture()
def cat(tmp_path: Path) -> tablestore.Catalog:
    c = tablestore.Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


def _rows(t: tablestore.Table) -> list[dict[str, Any]]:
    return sorted(t.read().to_pylist(), key=lambda r: r["id"])


def test_the_placeholder_of_each_column_type_is_what_debezium_sends() -> None:
    assert placeholder_of(pa.string(), P) == P and placeholder_of(pa.large_string(), P) == P
    assert placeholder_of(pa.binary(), P) == P.encode()
    assert placeholder_of(pa.list_(pa.string()), P) == [P]
    assert placeholder_of(pa.list_(pa.int32()), P)[:3] == [95, 95, 100]   # the text's bytes: '_', '_', 'd'
    assert placeholder_of(pa.int64(), P) is None and placeholder_of(pa.date32(), P) is None
    data = pa.Table.from_pylist([{"id": 1, "big": P, "raw": b"x", "tags": [P, "x"], "nums": list(P.encode())},
                                 {"id": 2, "big": "a", "raw": P.encode(), "tags": [P], "nums": None}], schema=SCHEMA)
    found = unchanged_cells(data, ["vip", "big", "raw", "tags", "nums"], P)
    assert {k: v.tolist() for k, v in found.items()} == {"big": [True, False], "raw": [False, True],
                                                         "tags": [False, True], "nums": [True, False]}


def test_an_update_with_unchanged_columns_keeps_the_stored_values(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.Table.from_pylist([{"id": i, "vip": False, "big": f"text{i}", "raw": bytes([i]), "tags": [f"t{i}"],
                                   "nums": [i]} for i in range(1, 4)], schema=SCHEMA))
    t.write(pa.Table.from_pylist([
        {"id": 1, "vip": True, **PLACEHOLDERS, "_row_kind": "+U"},      # every large column unchanged
        {"id": 2, "vip": True, "big": "new", "raw": P.encode(), "tags": None, "nums": [7], "_row_kind": "+U"},
        {"id": 4, "vip": False, "big": "four", "raw": b"4", "tags": ["x"], "nums": [4], "_row_kind": "+I"},
        {"id": 4, "vip": True, **PLACEHOLDERS, "_row_kind": "+U"},      # its value is earlier in the same write
    ], schema=CHANGELOG))
    assert _rows(t) == [
        {"id": 1, "vip": True, "big": "text1", "raw": b"\x01", "tags": ["t1"], "nums": [1]},
        {"id": 2, "vip": True, "big": "new", "raw": b"\x02", "tags": None, "nums": [7]},   # a real null is a value
        {"id": 3, "vip": False, "big": "text3", "raw": b"\x03", "tags": ["t3"], "nums": [3]},
        {"id": 4, "vip": True, "big": "four", "raw": b"4", "tags": ["x"], "nums": [4]}]


def test_a_plain_write_and_a_table_with_the_option_off_store_the_text(cat: tablestore.Catalog) -> None:
    """Only a changelog (rows with `_row_kind`) carries unchanged values; `ingest.unavailable-value-placeholder` = ''
    turns them off."""
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"])
    t.write(pa.Table.from_pylist([{"id": 1, "big": "a"}], schema=SCHEMA))
    t.write(pa.Table.from_pylist([{"id": 1, "big": P}], schema=SCHEMA))
    assert _rows(t)[0]["big"] == P
    off = cat.create_table("db.off", schema=SCHEMA, primary_key=["id"],
                           options={"ingest.unavailable-value-placeholder": ""})
    off.write(pa.Table.from_pylist([{"id": 1, "big": "a", "_row_kind": "+I"}], schema=CHANGELOG))
    off.write(pa.Table.from_pylist([{"id": 1, "big": P, "_row_kind": "+U"}], schema=CHANGELOG))
    assert _rows(off)[0]["big"] == P


def test_a_key_with_no_stored_row_takes_null(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"])
    t.write(pa.Table.from_pylist([{"id": 9, "vip": True, **PLACEHOLDERS, "_row_kind": "+U"}], schema=CHANGELOG))
    assert _rows(t) == [{"id": 9, "vip": True, "big": None, "raw": None, "tags": None, "nums": None}]


@pytest.mark.parametrize("engine", [{"merge-engine": "partial-update"},
                                    {"merge-engine": "aggregation", "fields.big.aggregate-function": "last_value",
                                     "fields.vip.aggregate-function": "last_value"}])
def test_other_merge_engines_keep_the_stored_value_too(cat: tablestore.Catalog, engine: dict[str, str]) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=engine)
    t.write(pa.Table.from_pylist([{"id": 1, "vip": False, "big": "a", "raw": b"r", "tags": ["x"], "nums": [1],
                                   "_row_kind": "+I"}], schema=CHANGELOG))
    t.write(pa.Table.from_pylist([{"id": 1, "vip": True, **PLACEHOLDERS, "_row_kind": "+U"}], schema=CHANGELOG))
    t.compact(full=True)
    assert _rows(t) == [{"id": 1, "vip": True, "big": "a", "raw": b"r", "tags": ["x"], "nums": [1]}]


_CHANGE = st.tuples(st.integers(0, 7), st.sampled_from(["+I", "+U", "-D"]), st.booleans(), st.booleans(),
                    st.integers(0, 99))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commits=st.lists(st.lists(st.lists(_CHANGE, max_size=12), min_size=1, max_size=3), min_size=1, max_size=5),
       buffer=st.sampled_from(["1 kb", "64 mb"]), partitioned=st.booleans())
def test_any_changelog_with_unchanged_values_equals_a_replay(tmp_path_factory: pytest.TempPathFactory,
                                                               commits: list[list[list[tuple[int, str, bool, bool,
                                                                                             int]]]],
                                                               buffer: str, partitioned: bool) -> None:
    """Random changelogs as PostgreSQL sends them (an update may leave `big` and `tags` unchanged: placeholders),
    several writes per commit, memtables flushed every few rows or never, one or several partitions: the table
    equals a replay in which a placeholder keeps the key's previous value, after every commit and a compaction."""
    cat = tablestore.Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                        ("v", pa.int64()), ("big", pa.string()), ("tags", pa.list_(pa.string()))])
    t = cat.create_table("db.t", schema=schema, primary_key=["id", "p"], partition_by=["p"] if partitioned else [],
                         options={"bucket": "2", "write-buffer-size": buffer})
    oracle: dict[tuple[int, str], dict[str, Any]] = {}
    for commit in commits:
        writer = t.log_writer()
        for write in commit:
            rows = []
            for key, kind, keep_big, keep_tags, v in write:
                where = (key, "a" if key % 2 else "b")
                before = oracle.get(where)
                if kind == "+U" and before is None:
                    kind = "+I"   # PostgreSQL updates only rows it has: a placeholder always has a stored value
                row = {"id": key, "p": where[1], "v": v, "big": f"b{v}", "tags": [f"t{v}"], "_row_kind": kind}
                if kind == "+U" and keep_big:
                    row["big"] = P
                if kind == "+U" and keep_tags:
                    row["tags"] = [P]
                rows.append(row)
                if kind == "-D":
                    oracle.pop(where, None)
                else:
                    assert before is not None or kind == "+I"
                    oracle[where] = {"id": key, "p": where[1], "v": v,
                                     "big": before["big"] if row["big"] == P else row["big"],   # type: ignore[index]
                                     "tags": before["tags"] if row["tags"] == [P] else row["tags"]}  # type: ignore
            if rows:
                writer.write(pa.Table.from_pylist(rows, schema=schema.append(pa.field("_row_kind", pa.string()))))
        writer.commit()
        writer.close()
        assert sorted(t.read().to_pylist(), key=lambda r: (r["id"], r["p"])) == [oracle[k] for k in sorted(oracle)]
    t.compact(full=True)
    assert sorted(t.read().to_pylist(), key=lambda r: (r["id"], r["p"])) == [oracle[k] for k in sorted(oracle)]
