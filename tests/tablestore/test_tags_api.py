"""Tags through the table API and the SQL catalog's helper seam (action name + args, as the JVM sends them; no
Spark): `Table.create_tag / delete_tag / tags`, `read(tag=)`, `$tags`, `CALL ... create_tag / delete_tag` and
`VERSION AS OF 'tag'`. What survives expiry is tested in tests/filestore/test_tags.py."""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from filestore import TagError, TagExistsError, TagNotFoundError
from tablestore.spark.sql_actions import ACTIONS
from tablestore.spark.sql_tables import SqlTableError, load_table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("amount", pa.float64())])


@pytest.fixture
def t(tmp_path: Path) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    table = cat.create_table("db.orders", schema=SCHEMA, primary_key=["id", "dt"], partition_by=["dt"],
                             options={"bucket": "1", "log.system": "none", "write-only": "true"})
    for i in range(3):
        table.write(pa.table({"id": [i, i + 10], "dt": ["2024-01-01", "2024-01-02"], "amount": [1.0, 2.0]},
                             schema=SCHEMA))
    return table


def call(t: tablestore.Table, action: str, **args: Any) -> list[dict[str, Any]]:
    warehouse = str(Path(t.path).parent.parent)
    result = ACTIONS[action]({"warehouse": warehouse, "options": {}, "table": t.name, **args})
    names = [c.split("` ")[0].strip("` ") for c in result["schema"].split(", `")]
    return [dict(zip(names, r)) for r in result["rows"]]


def sorted_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.sort_by([("id", "ascending"), ("dt", "ascending")]).to_pylist()


def test_tags_describe_their_snapshot_and_read_it(t: tablestore.Table) -> None:
    at_two = sorted_rows(t.read(snapshot_id=2))
    two = t.create_tag("release-1", snapshot=2)
    latest = t.create_tag("nightly")
    assert (two.name, two.snapshot_id, two.record_count, two.schema_id) == ("release-1", 2, 4, 0)
    assert two["snapshot_id"] == 2 and two.to_dict()["name"] == "release-1"
    assert two.commit_time == dt.datetime.fromtimestamp(t.snapshots()[1].time_millis / 1000, tz=dt.timezone.utc)
    assert abs((two.create_time - dt.datetime.now(dt.timezone.utc)).total_seconds()) < 60
    assert latest.snapshot_id == 3
    assert t.tags() == [two, latest]
    assert sorted_rows(t.read(tag="release-1")) == at_two
    assert sorted_rows(pa.Table.from_batches(list(t.read_batches(tag="release-1")))) == at_two
    assert t.read(tag="release-1", columns=["id"], filter=pa.compute.field("dt") == "2024-01-02").num_rows == 2
    with pytest.raises(tablestore.SnapshotNotFoundError, match="give a snapshot id, a timestamp or a tag"):
        t.read(tag="nightly", snapshot_id=1)

    tags = t.system_table("tags")
    assert tags.column_names == ["tag_name", "snapshot_id", "schema_id", "commit_time", "record_count",
                                 "create_time"]
    assert tags.column("tag_name").to_pylist() == ["release-1", "nightly"]
    assert tags.column("snapshot_id").to_pylist() == [2, 3] and tags.column("record_count").to_pylist() == [4, 6]

    t.delete_tag("nightly")
    assert [i.name for i in t.tags()] == ["release-1"]
    with pytest.raises(TagNotFoundError, match="table 'db.orders': tag 'nightly' does not exist"):
        t.read(tag="nightly")


def test_a_tag_read_after_the_schema_changed_shows_the_new_column_empty(t: tablestore.Table) -> None:
    t.create_tag("before")
    t.add_column("note", pa.string())
    old = t.read(tag="before")
    assert old.column_names == ["id", "dt", "amount", "note"] and old.column("note").null_count == old.num_rows == 6


def test_tags_survive_expiry_by_the_retention_options(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id", "dt"],
                         options={"log.system": "none", "snapshot.num-retained.min": "1",
                                  "snapshot.num-retained.max": "2"})
    for i in range(4):
        t.write(pa.table({"id": [i], "dt": ["d"], "amount": [float(i)]}, schema=SCHEMA), overwrite=True)
    t.create_tag("first", snapshot=1)
    before = t.read(tag="first").to_pylist()
    assert t.expire_snapshots().expired_snapshots == (1, 2)
    assert t.read(tag="first").to_pylist() == before == [{"id": 0, "dt": "d", "amount": 0.0}]
    assert t.remove_orphan_files(older_than=2**62) == []
    assert t.read(tag="first").to_pylist() == before


def test_sql_procedures_and_tags_system_table(t: tablestore.Table) -> None:
    [created] = call(t, "create_tag", tag="v1", snapshot=1)
    assert created["tag_name"] == "v1" and created["snapshot_id"] == 1 and created["record_count"] == 2
    assert isinstance(created["commit_time"], int) and isinstance(created["create_time"], int)   # epoch ms
    [latest] = call(t, "create_tag", tag="v3", snapshot=None)
    assert latest["snapshot_id"] == 3
    with pytest.raises(TagExistsError, match="table 'db.orders': tag 'v1' exists already"):
        call(t, "create_tag", tag="v1", snapshot=2)
    with pytest.raises(TagError, match="tag '7' is not a tag name"):
        call(t, "create_tag", tag="7", snapshot=None)
    rows = call(t, "system_table", name="tags")
    assert [(r["tag_name"], r["snapshot_id"]) for r in rows] == [("v1", 1), ("v3", 3)]
    assert [r["tag_name"] for r in call(t, "system_table", name="tags", schema_only=True)] == []
    assert call(t, "delete_tag", tag="v3") == [{"tag_name": "v3", "deleted": True}]
    with pytest.raises(TagNotFoundError, match="tag 'v3' does not exist"):
        call(t, "delete_tag", tag="v3")
    assert [r["tag_name"] for r in call(t, "system_table", name="tags")] == ["v1"]


def test_version_as_of_a_tag_resolves_to_its_snapshot_even_after_expiry(t: tablestore.Table) -> None:
    warehouse = str(Path(t.path).parent.parent)
    t.create_tag("v1", snapshot=1)
    args = {"warehouse": warehouse, "options": {}, "table": ["db", "orders"]}
    assert load_table({**args, "version": "v1"})["read_snapshot_id"] == 1
    assert load_table({**args, "version": "2"})["read_snapshot_id"] == 2
    t.expire_snapshots(retain_last=1)
    assert load_table({**args, "version": "v1"})["read_snapshot_id"] == 1
    assert load_table({**args, "version": "1"})["read_snapshot_id"] == 1   # the tag's copy of snapshot 1
    with pytest.raises(SqlTableError, match="table 'db.orders': tag 'nope' does not exist.*VERSION AS OF takes"):
        load_table({**args, "version": "nope"})


def test_cli_creates_lists_and_deletes_tags(t: tablestore.Table, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tablestore import cli

    warehouse = str(Path(t.path).parent.parent)
    assert cli.main(["create-tag", "db.orders", "v1", "--snapshot", "1", "--warehouse", warehouse,
                     "--output", "json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert (created["name"], created["snapshot_id"], created["record_count"]) == ("v1", 1, 2)
    assert cli.main(["create-tag", "db.orders", "latest", "--warehouse", warehouse]) == 0
    assert capsys.readouterr().out.strip() == "tagged snapshot 3 of db.orders as latest"
    assert cli.main(["create-tag", "db.orders", "latest", "--warehouse", warehouse]) != 0
    assert "tag 'latest' exists already" in capsys.readouterr().err
    assert cli.main(["system", "db.orders", "tags", "--warehouse", warehouse, "--output", "json"]) == 0
    assert "v1" in capsys.readouterr().out
    assert cli.main(["delete-tag", "db.orders", "v1", "--warehouse", warehouse]) == 0
    assert capsys.readouterr().out.strip() == "deleted tag v1 of db.orders"
    assert [i.name for i in t.tags()] == ["latest"]
