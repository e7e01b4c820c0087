"""Issue 11 item 7: damaged metadata gives a CorruptFileError naming the file and the table (and the CLI one line,
a non-zero exit, no traceback); a damaged hint is only a hint."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import fastavro
import pyarrow as pa
import pytest

import tablestore
from filestore.errors import CorruptFileError
from tablestore.cli import main

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def new_table(tmp_path: Path) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"])
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    t.write(pa.table({"id": [3], "v": ["c"]}, schema=SCHEMA))
    return t


def latest_snapshot(t: tablestore.Table) -> dict[str, object]:
    return json.loads((Path(t.path) / "snapshot" / f"snapshot-{t.latest_snapshot_id()}").read_text())


def manifest_list(t: tablestore.Table) -> Path:
    return Path(t.path) / "manifest" / str(latest_snapshot(t)["deltaManifestList"])


def manifest(t: tablestore.Table) -> Path:
    with open(manifest_list(t), "rb") as f:
        first: Any = next(iter(fastavro.reader(f)))
    return Path(t.path) / "manifest" / first["_FILE_NAME"]


def flip_deflate_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    end = len(data) - 16  # the last block's data ends where the 16-byte sync marker starts
    for i in range(end - 12, end - 4):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def delete(path: Path) -> Path:
    path.unlink()
    return path


def flipped(path: Path) -> Path:
    flip_deflate_bytes(path)
    return path


def directory(path: Path) -> Path:
    path.unlink()
    path.mkdir()
    return path


DAMAGES: dict[str, Callable[[tablestore.Table], Path]] = {
    "deleted manifest": lambda t: delete(manifest(t)),
    "deleted manifest list": lambda t: delete(manifest_list(t)),
    "flipped deflate bytes": lambda t: flipped(manifest(t)),
    "manifest is a directory": lambda t: directory(manifest(t)),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_manifests_name_the_file_and_the_table(tmp_path: Path, damage: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    t = new_table(tmp_path)
    damaged = DAMAGES[damage](t)
    with pytest.raises(CorruptFileError) as info:
        t.read()
    assert str(damaged) in str(info.value) and "'db.t'" in str(info.value)
    assert info.value.path == str(damaged)
    capsys.readouterr()
    for command in ("describe", "compact"):
        assert main([command, "db.t", "--warehouse", str(tmp_path)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith("error: ") and str(damaged) in err


def test_a_snapshot_file_that_is_a_directory_is_corrupt(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    path = Path(t.path) / "snapshot" / "snapshot-2"
    path.unlink()
    path.mkdir()
    with pytest.raises(CorruptFileError, match="snapshot-2"):
        t.read()


def test_latest_replaced_by_a_directory_is_only_a_damaged_hint(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    t = new_table(tmp_path)
    hint = Path(t.path) / "snapshot" / "LATEST"
    hint.unlink()
    hint.mkdir()
    assert t.latest_snapshot_id() == 2
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3]
    assert t.write(pa.table({"id": [4], "v": ["d"]}, schema=SCHEMA)) == 3  # the snapshot is published anyway
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3, 4]
    assert "LATEST" in caplog.text
    assert sorted(p.name for p in hint.parent.iterdir() if p.name.endswith(".tmp")) == []
    shutil.rmtree(hint)
    assert t.latest_snapshot_id() == 3


@pytest.mark.parametrize("damage", ["directory", "binary"])
def test_a_damaged_schema_file_is_corrupt(tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    t = new_table(tmp_path)
    path = Path(t.path) / "schema" / "schema-0"
    path.unlink()
    if damage == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CorruptFileError, match="schema-0"):
        tablestore.Catalog(str(tmp_path)).get_table("db.t")
    assert main(["describe", "db.t", "--warehouse", str(tmp_path), "--output", "json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["type"] == "CorruptFileError" and "schema-0" in out["error"]
