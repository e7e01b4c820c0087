"""`Table.expire_partitions`: partitions older than `partition.expiration-time` (their time read from their values)
are dropped by one OVERWRITE snapshot; the table then reads as the oracle of the kept partitions, a reader of an
older snapshot still sees them until snapshot expiry, and the options are checked at CREATE and ALTER."""
from __future__ import annotations

import datetime as dt
import logging
import os
import tempfile
from typing import Any, Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tablestore
from catalog import InvalidOptionError
from tablestore.errors import TableStoreError

NOW = dt.datetime(2024, 3, 10, 12, 0)
DAYS = [f"2024-03-{d:02d}" for d in range(1, 11)]
BY_DT = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("k", pa.int64(), nullable=False),
                   ("v", pa.int64())])
BY_HOUR = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("hour", pa.int32(), nullable=False),
                     pa.field("k", pa.int64(), nullable=False), ("v", pa.int64())])
NO_LOG = {"log.system": "none"}


@pytest.fixture
def cat() -> Iterator[tablestore.Catalog]:
    with tempfile.TemporaryDirectory() as root:
        c = tablestore.Catalog(root)
        c.create_database("db")
        yield c


def _rows(t: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in t.to_pylist()),
                  key=lambda r: [(x is None, 0 if x is None else x) for x in r])


def _data_files(t: tablestore.Table) -> set[str]:
    return {os.path.join(dp, f) for dp, _, fs in os.walk(t.path) for f in fs if "bucket-" in dp}


def test_expire_by_date_drops_old_partitions_in_one_overwrite(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=BY_DT, primary_key=["dt", "k"], partition_by=["dt"],
                         options={**NO_LOG, "partition.expiration-time": "3 d", "bucket": "2"})
    rows = [(d, k, i) for i, d in enumerate(DAYS) for k in range(3)]
    t.write(pa.table(list(zip(*rows)), schema=BY_DT))
    t.write(pa.table(list(zip(*[(d, 0, -1) for d in DAYS])), schema=BY_DT))   # a second file in every partition
    before = t.latest_snapshot_id()
    assert before is not None
    old = t.read(snapshot_id=before)

    expired = t.expire_partitions(now=NOW)

    assert expired == [{"dt": d} for d in DAYS[:7]]   # before 2024-03-07 12:00: 03-07 00:00 is too
    assert [s.kind for s in t.snapshots()][-1] == "OVERWRITE" and t.latest_snapshot_id() == before + 1
    assert _rows(t.read()) == sorted(r for r in _rows(old) if r[0] >= "2024-03-08")
    assert _rows(t.read(snapshot_id=before)) == _rows(old)           # time travel still sees them
    assert t.expire_partitions(now=NOW) == [] and t.latest_snapshot_id() == before + 1   # nothing more: no commit


def test_expired_files_go_with_snapshot_expiry(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=BY_DT, primary_key=["dt", "k"], partition_by=["dt"],
                         options={**NO_LOG, "partition.expiration-time": "1 d"})
    t.write(pa.table({"dt": DAYS, "k": [1] * 10, "v": list(range(10))}, schema=BY_DT))
    files_before = _data_files(t)
    t.expire_partitions(now=NOW)
    assert _data_files(t) == files_before          # still referenced by the older snapshot
    t.expire_snapshots(retain_last=1)
    kept = _data_files(t)
    assert kept < files_before and kept and all("dt=2024-03-10" in f for f in kept)
    assert _rows(t.read()) == [("2024-03-10", 1, 9)]


def test_expire_by_date_and_hour_with_a_pattern(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=BY_HOUR, primary_key=["dt", "hour", "k"], partition_by=["dt", "hour"],
                         options={**NO_LOG, "partition.expiration-time": "6 h",
                                  "partition.timestamp-pattern": "$dt $hour:00:00"})
    rows = [(d, h, 1, h) for d in DAYS[-2:] for h in range(24)]
    t.write(pa.table(list(zip(*rows)), schema=BY_HOUR))
    expired = t.expire_partitions(now=NOW)
    cutoff = NOW - dt.timedelta(hours=6)
    when = {(d, h): dt.datetime.fromisoformat(d) + dt.timedelta(hours=h) for d, h, _, _ in rows}
    assert expired == [{"dt": d, "hour": h} for (d, h), w in sorted(when.items(), key=lambda x: x[1]) if w < cutoff]
    assert _rows(t.read()) == sorted(r for r in rows if when[(r[0], r[1])] >= cutoff)


def test_a_table_without_primary_key_and_a_date_column(cat: tablestore.Catalog) -> None:
    schema = pa.schema([("day", pa.date32()), ("v", pa.int64())])
    t = cat.create_table("db.t", schema=schema, partition_by=["day"],
                         options={**NO_LOG, "partition.expiration-time": "2 d"})
    days = [dt.date(2024, 3, d) for d in (1, 1, 8, 9, 10)]
    t.write(pa.table({"day": days, "v": [1, 2, 3, 4, 5]}, schema=schema))
    assert t.expire_partitions(now=NOW) == [{"day": dt.date(2024, 3, 1)}, {"day": dt.date(2024, 3, 8)}]
    assert _rows(t.read()) == [(dt.date(2024, 3, 9), 4), (dt.date(2024, 3, 10), 5)]


def test_deletion_vectors_table(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=BY_DT, primary_key=["dt", "k"], partition_by=["dt"],
                         options={**NO_LOG, "deletion-vectors.enabled": "true", "bucket": "2",
                                  "partition.expiration-time": "2 d"})
    for v in range(3):   # updates of the same keys: older rows are marked deleted by vectors
        t.write(pa.table({"dt": DAYS, "k": [v % 2] * 10, "v": [v] * 10}, schema=BY_DT))
    before = t.latest_snapshot_id()
    old = t.read()
    assert any(f["deleted_row_count"] for f in t.files())
    t.expire_partitions(now=NOW)
    assert _rows(t.read()) == sorted(r for r in _rows(old) if r[0] >= "2024-03-09")
    assert _rows(t.read(snapshot_id=before)) == _rows(old)
    assert all(f["partition"]["dt"] >= "2024-03-09" for f in t.files())
    t.write(pa.table({"dt": ["2024-03-10"], "k": [0], "v": [99]}, schema=BY_DT))   # writes go on after the drop
    assert ("2024-03-10", 0, 99) in _rows(t.read())


def test_unparsable_partitions_are_kept_with_a_warning(cat: tablestore.Catalog,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    schema = pa.schema([("dt", pa.string()), ("v", pa.int64())])
    t = cat.create_table("db.t", schema=schema, partition_by=["dt"],
                         options={**NO_LOG, "partition.expiration-time": "1 d"})
    t.write(pa.table({"dt": ["2024-01-01", None, "someday"], "v": [1, 2, 3]}, schema=schema))
    with caplog.at_level(logging.WARNING):
        assert t.expire_partitions(now=NOW) == [{"dt": "2024-01-01"}]
    assert sorted(r[1] for r in _rows(t.read())) == [2, 3]
    assert "dt=someday" in caplog.text and "dt=__DEFAULT_PARTITION__" in caplog.text


def test_arguments_override_the_options(cat: tablestore.Catalog) -> None:
    schema = pa.schema([("dt", pa.string()), ("v", pa.int64())])
    t = cat.create_table("db.t", schema=schema, partition_by=["dt"], options=NO_LOG)
    t.write(pa.table({"dt": ["20240301", "20240309", "20240310"], "v": [1, 2, 3]}, schema=schema))
    with pytest.raises(TableStoreError, match="'db.t'.*'partition.expiration-time' is not set"):
        t.expire_partitions(now=NOW)
    assert t.expire_partitions(now=NOW, expiration_time="1 d") == []   # the default formatter reads none of them
    assert t.expire_partitions(now=NOW, expiration_time=dt.timedelta(days=1), timestamp_formatter="yyyyMMdd") == [
        {"dt": "20240301"}, {"dt": "20240309"}]
    with pytest.raises(InvalidOptionError, match="'db.t'.*'partition.timestamp-pattern'.*\\$day"):
        t.expire_partitions(now=NOW, expiration_time="1 d", timestamp_pattern="$day")
    with pytest.raises(InvalidOptionError, match="'db.t'.*'partition.expiration-time'"):
        t.expire_partitions(now=NOW, expiration_time="soon")


def test_now_with_a_zone_and_by_default(cat: tablestore.Catalog) -> None:
    schema = pa.schema([("dt", pa.string()), ("v", pa.int64())])
    t = cat.create_table("db.t", schema=schema, partition_by=["dt"],
                         options={**NO_LOG, "partition.expiration-time": "1 d"})
    today = dt.datetime.now().strftime("%Y-%m-%d")
    t.write(pa.table({"dt": ["2000-01-01", today], "v": [1, 2]}, schema=schema))
    aware = dt.datetime(1999, 1, 1, tzinfo=dt.timezone.utc)
    assert t.expire_partitions(now=aware) == []
    assert t.expire_partitions() == [{"dt": "2000-01-01"}]


def test_options_are_checked_at_create_and_alter(cat: tablestore.Catalog) -> None:
    with pytest.raises(InvalidOptionError, match="table 'db.t': option 'partition.timestamp-pattern'.*\\$hour"):
        cat.create_table("db.t", schema=BY_DT, primary_key=["dt", "k"], partition_by=["dt"],
                         options={**NO_LOG, "partition.timestamp-pattern": "$dt $hour:00:00"})
    with pytest.raises(InvalidOptionError, match="table 'db.t': option 'partition.timestamp-formatter'.*'QQ'"):
        cat.create_table("db.t", schema=BY_DT, primary_key=["dt", "k"], partition_by=["dt"],
                         options={**NO_LOG, "partition.timestamp-formatter": "yyyy QQ"})
    with pytest.raises(InvalidOptionError, match="partition.expiration-strategy.*values-time"):
        cat.create_table("db.t", schema=BY_DT, primary_key=["dt", "k"], partition_by=["dt"],
                         options={**NO_LOG, "partition.expiration-strategy": "update-time"})
    cat.create_table("db.t", schema=BY_DT, primary_key=["dt", "k"], partition_by=["dt"], options=NO_LOG)
    with pytest.raises(InvalidOptionError, match="table 'db.t': option 'partition.timestamp-pattern'.*\\$k"):
        cat.alter_table_options("db.t", {"partition.timestamp-pattern": "$k"})
    cat.alter_table_options("db.t", {"partition.expiration-time": "7 d", "partition.timestamp-pattern": "$dt",
                                     "partition.timestamp-formatter": "yyyy-MM-dd"})
    expiry = cat.get_table("db.t")._store.options.partition_expiry
    assert (expiry.expiration_ms, expiry.timestamp_pattern, expiry.check_interval_ms) == (7 * 86_400_000, "$dt",
                                                                                          3_600_000)


@settings(max_examples=15, deadline=None)
@given(writes=st.lists(st.lists(st.tuples(st.sampled_from(DAYS), st.integers(0, 4), st.integers(0, 9)),
                                min_size=1, max_size=8), min_size=1, max_size=3),
       days=st.integers(1, 12))
def test_oracle_of_kept_partitions(writes: list[list[tuple[str, int, int]]], days: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        c = tablestore.Catalog(root)
        c.create_database("db")
        t = c.create_table("db.t", schema=BY_DT, primary_key=["dt", "k"], partition_by=["dt"],
                           options={**NO_LOG, "bucket": "2", "partition.expiration-time": f"{days} d"})
        oracle: dict[tuple[str, int], int] = {}
        for rows in writes:
            t.write(pa.table(list(zip(*rows)), schema=BY_DT))
            oracle.update({(d, k): v for d, k, v in rows})
        cutoff = NOW - dt.timedelta(days=days)
        gone = sorted({d for d, _ in oracle if dt.datetime.fromisoformat(d) < cutoff})
        assert t.expire_partitions(now=NOW) == [{"dt": d} for d in gone]
        assert _rows(t.read()) == sorted((d, k, v) for (d, k), v in oracle.items() if d not in gone)


def test_the_command_line(cat: tablestore.Catalog, capsys: pytest.CaptureFixture[str]) -> None:
    from tablestore import cli

    schema = pa.schema([("dt", pa.string()), ("v", pa.int64())])
    t = cat.create_table("db.t", schema=schema, partition_by=["dt"],
                         options={**NO_LOG, "partition.expiration-time": "1 d"})
    t.write(pa.table({"dt": ["2024-03-01", "2024-03-10"], "v": [1, 2]}, schema=schema))
    warehouse = ["--warehouse", cat.warehouse]
    assert cli.main(["expire-partitions", "db.t", *warehouse, "--now", "2024-03-10T12:00", "--output", "json"]) == 0
    assert '"dt": "2024-03-01"' in capsys.readouterr().out
    assert cli.main(["expire-partitions", "db.t", *warehouse, "--timestamp-pattern", "$x"]) == 2
    assert "'partition.timestamp-pattern'" in capsys.readouterr().err
    assert cli.main(["expire-partitions", "db.t", *warehouse, "--now", "2024-03-12"]) == 0
    assert capsys.readouterr().out.strip() == "expired partitions of db.t: dt=2024-03-10"
