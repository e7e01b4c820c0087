"""Automatic tags (`tag.automatic-creation` = `process-time`), the service's `auto-tag` duty: daily, hourly and
two-hour tags named as Paimon names them, one per period, only the latest of missed periods, the retention that
deletes the oldest automatic tags and never one made by hand, nothing on a table without a snapshot, and the tagged
snapshot readable after the service's expiry removed it. The clock is given (`now`), in local wall time."""
from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from catalog import InvalidOptionError
from tablestore.service import Intervals, Service, ServiceConfig
from tablestore.service.autotag import AutoTagResult, run_auto_tag

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
AUTO = {"tag.automatic-creation": "process-time"}


def make(tmp_path: Path, name: str = "db.t", **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(name, SCHEMA, primary_key=["id"], options={"log.system": "none", **options})


def write(t: tablestore.Table, i: int) -> None:
    t.write(pa.table({"id": [i], "v": [f"v{i}"]}, schema=SCHEMA))


def turn(t: tablestore.Table, now: dt.datetime) -> AutoTagResult:
    return run_auto_tag(t.name, t._store, t.options, now)


def tags(t: tablestore.Table) -> dict[str, int]:
    return {i.name: i.snapshot_id for i in t.tags()}


def test_daily_tags_once_per_day_on_the_latest_snapshot(tmp_path: Path) -> None:
    t = make(tmp_path, **AUTO)
    write(t, 1)
    write(t, 2)
    assert turn(t, dt.datetime(2026, 12, 4, 0, 0, 30)).created == "2026-12-03"
    assert tags(t) == {"2026-12-03": 2}
    write(t, 3)
    for later in (dt.datetime(2026, 12, 4, 0, 1), dt.datetime(2026, 12, 4, 23, 59, 59)):
        assert turn(t, later) == AutoTagResult(None)   # the day 12-03 is tagged already; 12-04 has not ended
    assert turn(t, dt.datetime(2026, 12, 5, 0, 0)).created == "2026-12-04"
    assert tags(t) == {"2026-12-03": 2, "2026-12-04": 3}
    assert t.read(tag="2026-12-03").num_rows == 2


def test_hourly_and_two_hour_tags_are_named_after_the_period_start(tmp_path: Path) -> None:
    t = make(tmp_path, **AUTO, **{"tag.creation-period": "hourly"})
    write(t, 1)
    assert turn(t, dt.datetime(2026, 12, 3, 11, 0, 5)).created == "2026-12-03 10"
    assert turn(t, dt.datetime(2026, 12, 3, 11, 59)).created is None
    assert turn(t, dt.datetime(2026, 12, 4, 0, 2)).created == "2026-12-03 23"
    two = run_auto_tag(t.name, t._store, {**t.options, "tag.creation-period": "two-hours"},
                       dt.datetime(2026, 12, 4, 3, 30))
    assert two.created == "2026-12-04 00"   # 00:00-02:00 ended; 02:00-04:00 has not
    assert sorted(tags(t)) == ["2026-12-03 10", "2026-12-03 23", "2026-12-04 00"]


def test_the_delay_and_missed_periods(tmp_path: Path) -> None:
    t = make(tmp_path, **AUTO, **{"tag.creation-delay": "10 min"})
    write(t, 1)
    assert turn(t, dt.datetime(2026, 12, 4, 0, 5)).created == "2026-12-02"   # 12-03 is due at 00:10 only
    assert turn(t, dt.datetime(2026, 12, 4, 0, 10)).created == "2026-12-03"
    # the service was down for days: only the latest ended day is tagged, as Paimon does
    assert turn(t, dt.datetime(2026, 12, 9, 8, 0)).created == "2026-12-08"
    assert sorted(tags(t)) == ["2026-12-02", "2026-12-03", "2026-12-08"]
    with pytest.raises(InvalidOptionError, match=r"table 'db.t': option 'tag.creation-delay' must be less"):
        run_auto_tag(t.name, t._store, {**t.options, "tag.creation-delay": "1 d"}, dt.datetime(2026, 12, 9))


def test_retention_deletes_the_oldest_automatic_tags_only(tmp_path: Path) -> None:
    t = make(tmp_path, **AUTO, **{"tag.num-retained-max": "2"})
    write(t, 1)
    t.create_tag("release-1")
    t.create_tag("2026-12-03 10")   # a name of another period's format: not an automatic daily tag
    for day in range(1, 5):
        write(t, 10 + day)
        result = turn(t, dt.datetime(2026, 12, day + 1, 0, 1))
        assert result.created == f"2026-12-{day:02d}"
    assert result.deleted == ("2026-12-02",)
    assert sorted(tags(t)) == ["2026-12-03", "2026-12-03 10", "2026-12-04", "release-1"]
    assert tags(t)["release-1"] == 1 and t.read(tag="release-1").num_rows == 1


def test_no_tag_and_no_commit_on_a_table_without_snapshots(tmp_path: Path) -> None:
    t = make(tmp_path, **AUTO)
    assert turn(t, dt.datetime(2026, 12, 4, 1, 0)) == AutoTagResult(None)
    assert t.snapshots() == [] and t.tags() == []
    write(t, 1)
    assert turn(t, dt.datetime(2026, 12, 4, 1, 0)).created == "2026-12-03"


def test_unsupported_modes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="tag.automatic-creation"):
        make(tmp_path, **{"tag.automatic-creation": "watermark"})


def test_the_service_tags_and_the_tag_outlives_its_expiry(tmp_path: Path) -> None:
    t = make(tmp_path, **AUTO, **{"tag.creation-period": "hourly", "snapshot.num-retained.min": "1",
                                  "snapshot.time-retained": "1 ms"})
    plain = make(tmp_path, "db.plain")   # no automatic tags: the duty does not run for it
    write(t, 1)
    write(plain, 1)
    s = Service(ServiceConfig(str(tmp_path), intervals=Intervals(compaction_s=0.05, expiry_s=0.05, orphan_s=3600)))
    before = (dt.datetime.now() - dt.timedelta(hours=1)).strftime("%Y-%m-%d %H")
    s.run_once()
    after = (dt.datetime.now() - dt.timedelta(hours=1)).strftime("%Y-%m-%d %H")
    [name] = tags(t)
    assert name in (before, after)   # the hour that ended last, by the local clock
    assert s.held()["db.t"].runs["auto-tag"] == 1
    for i in range(2, 5):
        write(t, i)
    time.sleep(0.06)
    s.run_once()
    assert [i.id for i in t.snapshots()] == [4]   # snapshot 1 expired...
    assert t.read(tag=name).to_pylist() == [{"id": 1, "v": "v1"}]   # ...its tag still reads it
    assert tags(t) == {name: 1} and plain.tags() == []
