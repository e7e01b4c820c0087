"""Issue 11 items 12-14: the command line. Global options before or after the command, JSON errors, documented
exit codes, DESCRIBE DETAIL per partition, and a compaction that reports what it did."""
from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pytest

import tablestore
from tablestore import cli

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("v", pa.string())])


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id", "dt"], partition_by=["dt"],
                         options={"bucket": "2", "write-only": "true"})
    for i in range(3):
        t.write(pa.table({"id": [i, i + 10, i + 20], "dt": ["a", "a", "b"], "v": ["x", "y", "z"]}, schema=SCHEMA))
    return str(tmp_path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- item 12: global options, JSON errors, exit codes --------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["--warehouse", "{wh}", "--output", "json", "describe", "db.t"],
    ["describe", "db.t", "--warehouse", "{wh}", "--output", "json"],
    ["--output", "json", "describe", "--warehouse", "{wh}", "db.t"],
    ["--warehouse={wh}", "describe", "db.t", "--output=json"],
])
def test_global_options_work_before_or_after_the_command(warehouse: str, capsys: pytest.CaptureFixture[str],
                                                         argv: list[str]) -> None:
    code, out, err = run(capsys, *[a.replace("{wh}", warehouse) for a in argv])
    assert (code, err) == (0, "")
    assert json.loads(out)["name"] == "db.t"


@pytest.mark.parametrize(("argv", "code", "type_"), [
    (["describe", "db.t"], 1, "UsageError"),  # no warehouse
    (["describe", "db.nope", "--warehouse", "{wh}"], 2, "TableNotFoundError"),
    (["describe", "bad name", "--warehouse", "{wh}"], 2, "InvalidIdentifierError"),
    (["frobnicate", "db.t"], 1, "UsageError"),
    (["compact", "db.t", "--warehouse", "{wh}", "--partition", "nope"], 1, "UsageError"),
    (["compact", "db.t", "--warehouse", "{wh}", "--partition", "v=1"], 2, "TableStoreError"),
    (["describe", "db.t", "--output", "yaml"], 1, "UsageError"),
])
def test_errors_have_documented_exit_codes_and_are_json_with_json_output(
    warehouse: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], code: int,
    type_: str,
) -> None:
    monkeypatch.delenv(cli.WAREHOUSE_ENV, raising=False)
    argv = [a.replace("{wh}", warehouse) for a in argv]
    got, out, err = run(capsys, *argv)
    assert got == code and out == "" and err.startswith("error: ") and err.count("\n") == 1
    if "yaml" in argv:
        return  # an invalid --output is not json either
    got, out, err = run(capsys, *argv, "--output", "json")
    assert (got, err) == (code, "")
    assert json.loads(out) == {"error": json.loads(out)["error"], "type": type_, "exit_code": code}


def test_exit_codes_are_documented_in_the_help_and_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for line in cli.EXIT_CODES_HELP.splitlines()[1:]:
        code, meaning = line.strip().split("  ", 1)
        assert re.search(rf"\| `?{code}`? \| {re.escape(meaning)}", readme), line
    assert "exit codes" in cli.build_parser().format_help()


# -- item 13: describe ----------------------------------------------------------------------------------------------
def test_describe_shows_the_describe_detail_fields_and_each_partition(
    warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "describe", "db.t", "--warehouse", warehouse, "--output", "json")
    d = json.loads(out)
    for key in ("name", "path", "file_format", "bucket", "primary_key", "partition_by", "options",
                "latest_snapshot", "file_count", "last_modified"):
        assert key in d, key
    assert d["file_format"] == "parquet" and d["latest_snapshot"]["id"] == 3
    by_value = {p["partition"]["dt"]: p for p in d["partitions"]}
    assert set(by_value) == {"a", "b"}
    assert by_value["b"]["sorted_runs"] == {"0": 3} or by_value["b"]["sorted_runs"] == {"1": 3}
    assert by_value["b"]["compacted"] is False and by_value["b"]["file_count"] == 3
    assert sum(p["file_count"] for p in d["partitions"]) == d["file_count"]
    code, out, _ = run(capsys, "describe", "db.t", "--warehouse", warehouse, "--partition", "dt=b")
    assert code == 0
    assert re.search(r"partition +dt=b +files=3 .*runs per bucket \{\d: 3\} not compacted modified 20", out)
    assert "dt=a" not in out and "file format  parquet" in out and re.search(r"modified +20\d\d-", out)


def test_describe_partition_of_the_library(warehouse: str) -> None:
    t = tablestore.Catalog(warehouse).get_table("db.t")
    t.compact(full=True, partitions=[{"dt": "a"}])
    a: Any = t.describe(partition={"dt": "a"})["partitions"]
    b: Any = t.describe(partition={"dt": "b"})["partitions"]
    assert [p["partition"] for p in a] == [{"dt": "a"}] and a[0]["compacted"] is True
    assert [p["partition"] for p in b] == [{"dt": "b"}] and b[0]["compacted"] is False


def test_the_null_partition_and_a_look_alike_string_are_selected_as_describe_prints_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string())])
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.n", schema=schema, partition_by=["dt"],
                         options={"bucket": "1", "write-only": "true"})
    for i in range(2):  # two runs in each of three partitions: null, the literal "__DEFAULT_PARTITION__", "x"
        t.write(pa.table({"id": [i, i + 10, i + 20], "dt": [None, "__DEFAULT_PARTITION__", "x"]}, schema=schema))
    wh = str(tmp_path)
    code, out, _ = run(capsys, "describe", "db.n", "--warehouse", wh)
    names = re.findall(r"partition +(\S+) +files=2", out)
    assert code == 0 and sorted(names) == ["dt=__DEFAULT_PARTITION__", "dt=__DEFAULT_PARTITION__%", "dt=x"]
    for name, value in [("dt=__DEFAULT_PARTITION__", None), ("dt=__DEFAULT_PARTITION__%", "__DEFAULT_PARTITION__")]:
        code, out, _ = run(capsys, "compact", "db.n", "--full", "--partition", name, "--warehouse", wh)
        assert code == 0 and "files 2 -> 1" in re.sub(r" +", " ", out)
        compacted = {p["partition"]["dt"]: p["compacted"] for p in t.describe()["partitions"]}  # type: ignore[attr-defined]
        assert compacted[value] is True
    assert compacted == {None: True, "__DEFAULT_PARTITION__": True, "x": False}


# -- item 14: compact -----------------------------------------------------------------------------------------------
def test_compact_reports_what_it_did_for_the_partitions_asked(warehouse: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "compact", "db.t", "--full", "--partition", "dt=b", "--warehouse", warehouse)
    assert code == 0
    assert re.match(r"compacted db\.t in \d+\.\d\d s: COMPACT snapshot 4\n", out)
    assert re.search(r"files +3 -> 1\n", out) and re.search(r"bytes +\d+ -> \d+\n", out)
    assert "sorted runs per bucket max 3 -> 1 (1 of 1 buckets in one run)" in out
    t = tablestore.Catalog(warehouse).get_table("db.t")
    partitions: Any = t.describe()["partitions"]
    compacted = {p["partition"]["dt"]: p["compacted"] for p in partitions}
    assert compacted == {"a": False, "b": True}
    code, out, _ = run(capsys, "compact", "db.t", "--full", "--partition", "dt=b", "--warehouse", warehouse,
                       "--output", "json")
    report = json.loads(out)
    assert report["snapshot_id"] is None and report["before"] == report["after"]
    assert set(report) >= {"seconds", "before", "after", "partitions"}


def test_compact_draws_a_progress_bar_on_a_terminal(warehouse: str, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []
    real = cli.progress_bar

    @contextlib.contextmanager
    def spy(**kwargs: Any) -> Iterator[Callable[[int, int], None] | None]:
        with real(**kwargs) as update:
            assert update is not None, "a bar on a terminal"

            def both(done: int, total: int) -> None:
                seen.append((done, total))
                update(done, total)

            yield both

    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    monkeypatch.setattr(cli, "progress_bar", spy)
    assert run(capsys, "compact", "db.t", "--full", "--warehouse", warehouse)[0] == 0
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] > 0


def test_compact_losing_to_a_concurrent_writer_says_nothing_was_lost(
    warehouse: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tablestore.Catalog(warehouse).get_table("db.t")

    @contextlib.contextmanager
    def race(**_: Any) -> Iterator[Callable[[int, int], None]]:
        def update(done: int, total: int) -> None:
            if done == total > 0:  # everything rewritten, not committed yet: another writer overwrites
                other.write(pa.table({"id": [99], "dt": ["a"], "v": ["new"]}, schema=SCHEMA), overwrite={"dt": "a"})

        yield update

    monkeypatch.setattr(cli, "progress_bar", race)
    code, out, err = run(capsys, "compact", "db.t", "--full", "--warehouse", warehouse)
    assert code == 4 and out == ""
    assert "concurrent writer" in err and "Nothing was lost" in err and "Retrying is safe" in err
    assert sorted(r["id"] for r in other.read().to_pylist()) == [20, 21, 22, 99]
    monkeypatch.undo()
    assert run(capsys, "compact", "db.t", "--full", "--warehouse", warehouse)[0] == 0
    assert sorted(r["id"] for r in other.read().to_pylist()) == [20, 21, 22, 99]


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_reader_that_goes_away_stops_the_output_quietly(warehouse: str, output: str) -> None:
    """`tablestore describe db.t | head`: no traceback for a closed pipe, and the documented exit code."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    try:
        proc = subprocess.run([sys.executable, "-m", "tablestore.cli", "describe", "db.t", "--warehouse", warehouse,
                               "--output", output], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.stderr == "" and proc.returncode == cli.EXIT_READER_GONE == 141


def test_expire_retain_last_keeps_the_newest_snapshots(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "expire", "db.t", "--retain-last", "1", "--warehouse", warehouse, "--output", "json")
    assert code == 0 and json.loads(out)["expired"] == [1, 2]
    assert [s.id for s in tablestore.Catalog(warehouse).get_table("db.t").snapshots()] == [3]


def test_ingest_into_a_missing_table_without_create_names_it_before_spark_starts(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "ingest", "shop.orders", "--topic", "shop.public.orders", "--bootstrap-servers",
                         "127.0.0.1:1", "--warehouse", str(tmp_path))
    assert code == 2
    assert "table 'shop.orders' does not exist" in err and "--create" in err


def test_ingest_jobs_cap_a_micro_batch_by_default() -> None:
    """`tablestore ingest` and `ingest-database` read at most 100,000 records per micro-batch unless told (0: no
    cap), as their Python configs do: a job that fell behind must not read everything in one batch."""
    import argparse

    from tablestore import cli_ingest
    from tablestore.spark.database_sync import DatabaseIngestConfig
    from tablestore.spark.ingest import IngestConfig

    for add, argv in ((cli_ingest.add_arguments, ["--topic", "t", "--bootstrap-servers", "b"]),
                      (cli_ingest.add_database_arguments, ["db", "--topic-pattern", "x.*", "--bootstrap-servers", "b"])):
        parser = argparse.ArgumentParser()
        add(parser)
        assert parser.parse_args(argv).max_offsets_per_trigger == 100_000
        assert parser.parse_args([*argv, "--max-offsets-per-trigger", "0"]).max_offsets_per_trigger == 0
    assert IngestConfig(table="d.t", topic="t", bootstrap_servers="b", warehouse="w").max_offsets_per_trigger == \
        100_000 == DatabaseIngestConfig(database="d", topic_pattern="x", bootstrap_servers="b",
                                        warehouse="w").max_offsets_per_trigger
