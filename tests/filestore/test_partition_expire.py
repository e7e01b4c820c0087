"""Partition expiry's pure part (filestore.partition_expire): a partition's time from its values by pattern and
formatter, the Java-to-strptime translation, and the choice of expired partitions, against an oracle."""
from __future__ import annotations

import datetime as dt
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filestore import PartitionTimeExtractor, pattern_references, strptime_format
from filestore.partition_expire import expired_partitions

DAY = 86_400_000


@pytest.mark.parametrize("java, python", [
    ("yyyy-MM-dd", "%Y-%m-%d"),
    ("yyyyMMdd", "%Y%m%d"),
    ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S"),
    ("yyyy-MM-dd'T'HH", "%Y-%m-%dT%H"),
    ("yyyy/MM/dd HH:mm:ss.SSS", "%Y/%m/%d %H:%M:%S.%f"),
    ("dd MMM yy", "%d %b %y"),
    ("yyyy-MM-dd 'at' h a", "%Y-%m-%d at %I %p"),
    ("yyyy '%' MM", "%Y %% %m"),
    ("yyyy''MM", "%Y'%m"),
])
def test_java_formatter_translates_to_strptime(java: str, python: str) -> None:
    assert strptime_format(java) == python


@pytest.mark.parametrize("java", ["yyyy-MM-dd QQ", "yyyy-MM-dd'T", "G yyyy", "yyyy-MMMMM"])
def test_unsupported_formatter_is_a_value_error(java: str) -> None:
    with pytest.raises(ValueError):
        strptime_format(java)


@pytest.mark.parametrize("keys, values, pattern, formatter, expected", [
    (["dt"], ["2024-03-05"], None, None, dt.datetime(2024, 3, 5)),                       # date-only by default
    (["dt"], ["2024-03-05 07:08:09"], None, None, dt.datetime(2024, 3, 5, 7, 8, 9)),
    (["dt"], ["2024-03-05 07:08"], None, None, dt.datetime(2024, 3, 5, 7, 8)),
    (["dt", "hour"], ["2024-03-05", "7"], "$dt $hour:00:00", None, dt.datetime(2024, 3, 5, 7)),
    (["dt", "hour"], ["20240305", "07"], "$dt $hour", "yyyyMMdd HH", dt.datetime(2024, 3, 5, 7)),
    (["dt"], ["20240305"], None, "yyyyMMdd", dt.datetime(2024, 3, 5)),
    (["year", "month", "day"], ["2024", "3", "5"], "$year-$month-$day", None, dt.datetime(2024, 3, 5)),
    (["region", "dt"], ["eu", "2024-03-05"], "$dt", "yyyy-MM-dd", dt.datetime(2024, 3, 5)),   # not the first column
    (["d", "dt"], ["x", "2024-03-05"], "$dt", None, dt.datetime(2024, 3, 5)),       # longest column name wins
])
def test_extract(keys: list[str], values: list[str], pattern: str | None, formatter: str | None,
                 expected: dt.datetime) -> None:
    assert PartitionTimeExtractor.of(pattern, formatter).extract(keys, values) == expected


@pytest.mark.parametrize("values, formatter", [
    (["__DEFAULT_PARTITION__"], None), (["not a date"], None), (["2024-13-01"], None),
    (["2024-03-05"], "yyyyMMdd"), (["20240305"], None),
])
def test_unparsable_values_are_value_errors(values: list[str], formatter: str | None) -> None:
    with pytest.raises(ValueError, match="does not match the formatter"):
        PartitionTimeExtractor.of(None, formatter).extract(["dt"], values)


def test_pattern_references_name_partition_columns() -> None:
    assert pattern_references("$dt $hour:00:00", ["dt", "hour"]) == ["dt", "hour"]
    assert pattern_references("2024", ["dt"]) == []
    with pytest.raises(ValueError, match=r"\$day, which is not a partition column"):
        pattern_references("$day", ["dt"])


def test_unparsable_partitions_are_kept_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    extractor = PartitionTimeExtractor.of(None, None)
    partitions = [("2024-01-01",), ("__DEFAULT_PARTITION__",), ("soon",), ("2024-01-10",)]
    with caplog.at_level(logging.WARNING, logger="filestore.partition_expire"):
        chosen = expired_partitions("db.t", ["dt"], partitions, extractor, 2 * DAY, dt.datetime(2024, 1, 10))
    assert chosen == [("2024-01-01",)]
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "dt=__DEFAULT_PARTITION__" in warned and "dt=soon" in warned and "db.t" in warned


def test_the_cutoff_is_strict() -> None:
    extractor = PartitionTimeExtractor.of(None, None)
    now = dt.datetime(2024, 1, 3)
    assert expired_partitions("t", ["dt"], [("2024-01-01",), ("2024-01-02",)], extractor, DAY, now) == [
        ("2024-01-01",)]


def test_an_unpartitioned_table_has_nothing_to_expire() -> None:
    assert expired_partitions("t", [], [()], PartitionTimeExtractor.of(None, None), DAY, dt.datetime.now()) == []


times = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2030, 1, 1)).map(
    lambda t: t.replace(minute=0, second=0, microsecond=0))


@settings(max_examples=60, deadline=None)
@given(partition_times=st.lists(times, max_size=20), now=times, hours=st.integers(1, 24 * 400),
       layout=st.sampled_from(["date", "date+hour", "compact"]))
def test_choice_matches_the_oracle(partition_times: list[dt.datetime], now: dt.datetime, hours: int,
                                   layout: str) -> None:
    """Rendered in three layouts, the partitions chosen are exactly those whose time is before now - expiration."""
    if layout == "date":
        keys, pattern, formatter = ["dt"], None, None
        values = [(t.strftime("%Y-%m-%d"),) for t in partition_times]
        partition_times = [t.replace(hour=0) for t in partition_times]
    elif layout == "date+hour":
        keys, pattern, formatter = ["dt", "hour"], "$dt $hour:00:00", None
        values = [(t.strftime("%Y-%m-%d"), str(t.hour)) for t in partition_times]
    else:
        keys, pattern, formatter = ["day", "hh"], "$day$hh", "yyyyMMddHH"
        values = [(t.strftime("%Y%m%d"), t.strftime("%H")) for t in partition_times]
    extractor = PartitionTimeExtractor.of(pattern, formatter)
    chosen = expired_partitions("t", keys, values, extractor, hours * 3_600_000, now)
    cutoff = now - dt.timedelta(hours=hours)
    assert chosen == sorted({v for v, t in zip(values, partition_times) if t < cutoff},
                            key=lambda v: extractor.extract(keys, v))
