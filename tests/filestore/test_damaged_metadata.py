"""Issue 11 item 7: damaged metadata gives a CorruptFileError naming the file and the table (and the CLI one line,
a non-zero exit, no traceback), including a LATEST/EARLIEST hint that cannot be read; a missing or stale hint
is only a hint."""
from __future__ import annotations

import json
import os
import subprocess
import sys
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


def files_of(t: tablestore.Table) -> list[str]:
    return sorted(str(p.relative_to(t.path)) for p in Path(t.path).rglob("*") if p.is_file())


def test_latest_replaced_by_a_directory_is_corrupt(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    hint = directory(Path(t.path) / "snapshot" / "LATEST")
    before = files_of(t)
    for attempt in (t.read, t.snapshots, lambda: t.write(pa.table({"id": [4], "v": ["d"]}, schema=SCHEMA))):
        with pytest.raises(CorruptFileError) as info:
            attempt()
        assert info.value.path == str(hint) and "'db.t'" in str(info.value) and "LATEST hint" in str(info.value)
    assert files_of(t) == before  # the write committed nothing and left nothing behind
    hint.rmdir()  # the repair the message names
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3]


def test_earliest_replaced_by_a_directory_is_corrupt(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    hint = Path(t.path) / "snapshot" / "EARLIEST"
    hint.mkdir()  # a table that never expired a snapshot has no EARLIEST hint yet
    with pytest.raises(CorruptFileError) as info:
        t.snapshots()
    assert info.value.path == str(hint) and "'db.t'" in str(info.value) and "EARLIEST hint" in str(info.value)
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3]  # reading the latest needs no EARLIEST


def test_a_hint_that_is_not_a_number_is_corrupt(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    hint = Path(t.path) / "snapshot" / "LATEST"
    hint.write_bytes(b"\xff\xfegarbage")
    with pytest.raises(CorruptFileError, match="LATEST hint holds"):
        t.read()


@pytest.mark.parametrize("content", [None, b"", b"1", b"99"])
def test_a_missing_empty_or_stale_hint_is_only_a_hint(tmp_path: Path, content: bytes | None) -> None:
    t = new_table(tmp_path)
    hint = Path(t.path) / "snapshot" / "LATEST"
    if content is None:
        hint.unlink()
    else:
        hint.write_bytes(content)
    assert t.latest_snapshot_id() == 2
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3]
    assert t.write(pa.table({"id": [4], "v": ["d"]}, schema=SCHEMA)) == 3


@pytest.mark.parametrize("damage", ["disk full", "directory"])
def test_a_commit_whose_hint_update_fails_still_succeeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture, damage: str) -> None:
    """The snapshot is published before the hint is rewritten: the commit has happened, so it reports success
    (an error would invite a retry that appends the rows twice) and keeps its files. A hint left stale is probed
    past; one left damaged is named by the next read."""
    from filestore.fileio import FileIO

    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={"write-only": "true"})
    t.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    hint = Path(t.path) / "snapshot" / "LATEST"

    def fail(self: FileIO, path: str, data: bytes) -> None:
        if damage == "directory":
            hint.unlink()
            hint.mkdir()
            raise IsADirectoryError(21, "Is a directory", path)
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(FileIO, "replace_hint", fail)
    assert t.write(pa.table({"id": [4], "v": ["d"]}, schema=SCHEMA)) == 2
    monkeypatch.undo()
    assert "could not update the hint" in caplog.text
    if damage == "directory":
        with pytest.raises(CorruptFileError, match="LATEST"):
            t.read()
        hint.rmdir()
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3, 4]
    assert sorted(p.name for p in hint.parent.iterdir() if p.name.endswith(".tmp")) == []


def test_a_commit_whose_hint_is_damaged_meanwhile_says_it_committed(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With compaction after the write, the damaged hint stops the compaction: the error says the snapshot was
    committed and the data must not be written again."""
    from filestore.fileio import FileIO

    t = new_table(tmp_path)
    hint = Path(t.path) / "snapshot" / "LATEST"

    def damage(self: FileIO, path: str, data: bytes) -> None:
        hint.unlink()
        hint.mkdir()
        raise IsADirectoryError(21, "Is a directory", path)

    monkeypatch.setattr(FileIO, "replace_hint", damage)
    with pytest.raises(tablestore.CompactionError, match="snapshot 3 was committed.*do not write the data again"):
        t.write(pa.table({"id": [4], "v": ["d"]}, schema=SCHEMA))
    monkeypatch.undo()
    hint.rmdir()
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3, 4]


@pytest.mark.parametrize("output", ["text", "json"])
def test_the_cli_reports_a_damaged_hint_in_one_line(tmp_path: Path, output: str) -> None:
    t = new_table(tmp_path)
    hint = directory(Path(t.path) / "snapshot" / "LATEST")
    for command in ("describe", "compact"):
        proc = subprocess.run(
            [sys.executable, "-m", "tablestore.cli", "--warehouse", str(tmp_path), "--output", output, command,
             "db.t"], capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONWARNINGS": "error"})
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr + proc.stdout
        if output == "text":
            assert proc.stdout == "" and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
            assert str(hint) in proc.stderr and "'db.t'" in proc.stderr
        else:
            error = json.loads(proc.stdout)
            assert error["type"] == "CorruptFileError" and str(hint) in error["error"] and error["exit_code"] == 2


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
