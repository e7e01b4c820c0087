"""Partition expiry (Paimon's `partition.expiration-time`, strategy `values-time`): a partition whose time, read
from its values, is older than now minus the expiration time is dropped.

A partition's time (Paimon's PartitionTimeExtractor):
- the timestamp text is `partition.timestamp-pattern` with each `$column` replaced by that partition column's value
  (`$dt $hour:00:00`), or without a pattern the first partition column's value;
- it is parsed with `partition.timestamp-formatter`, a Java DateTimeFormatter pattern (`yyyy-MM-dd`, `yyyyMMdd`,
  `yyyy-MM-dd HH:mm:ss`), translated once to a `strptime` format; without one, `yyyy-MM-dd HH:mm:ss`, and
  date-only `yyyy-MM-dd` values (midnight) are accepted too. Times are wall-clock times without a zone.
A partition whose text does not parse (the null partition, a value of another shape) is never expired: a warning
names it, as Paimon does.

Protocol of `expire_partitions` (one call):
1. Read the latest snapshot N's live files; the partitions are the distinct partitions of its entries.
2. Choose the expired ones: `expired_partitions`, a pure function of the partition values, the policy and now.
3. Commit ONE OVERWRITE snapshot deleting every live file of those partitions (filestore.commit, an overwrite of
   exactly that set of partitions: on a lost publish race the live files are read again, so files a concurrent
   writer added to a chosen partition before the commit go with it). It adds no file and no log offsets: nothing
   reaches the table's log (Paimon drops expired partitions without a changelog).
4. The data files stay until snapshot expiry removes the last snapshot that references them: reading an older
   snapshot still shows the partitions until then.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from filestore.errors import FileStoreError
from filestore.meta import CommitKind, Partition
from filestore.options import PartitionExpiry

if TYPE_CHECKING:
    from filestore.store import FileStore

log = logging.getLogger(__name__)

DEFAULT_FORMATTER = "yyyy-MM-dd HH:mm:ss"
DEFAULT_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M", "%Y-%m-%d")
"""Without a formatter: Paimon's default `yyyy-MM-dd HH:mm:ss`, with fractions, minutes only or a date alone."""

_REFERENCE = re.compile(r"\$(\w+)")
# Java DateTimeFormatter letters -> strptime directive, by letter and run length (None: any length)
_LETTERS: dict[str, dict[int | None, str]] = {
    "y": {2: "%y", None: "%Y"}, "u": {2: "%y", None: "%Y"},
    "M": {1: "%m", 2: "%m", 3: "%b", 4: "%B"}, "L": {1: "%m", 2: "%m", 3: "%b", 4: "%B"},
    "d": {1: "%d", 2: "%d"}, "D": {1: "%j", 2: "%j", 3: "%j"},
    "H": {1: "%H", 2: "%H"}, "h": {1: "%I", 2: "%I"}, "a": {1: "%p"},
    "m": {1: "%M", 2: "%M"}, "s": {1: "%S", 2: "%S"}, "S": {None: "%f"},
    "E": {1: "%a", 2: "%a", 3: "%a", 4: "%A"},
}


def strptime_format(java_pattern: str) -> str:
    """The `strptime` format of a Java DateTimeFormatter pattern (`yyyy-MM-dd HH:mm:ss` -> `%Y-%m-%d %H:%M:%S`);
    quoted text ('T') is literal. ValueError naming a letter it does not support."""
    out: list[str] = []
    i, n = 0, len(java_pattern)
    while i < n:
        c = java_pattern[i]
        if c == "'":
            end = java_pattern.find("'", i + 1)
            if end < 0:
                raise ValueError(f"{java_pattern!r} has an unclosed quote")
            out.append("'" if end == i + 1 else java_pattern[i + 1:end].replace("%", "%%"))
            i = end + 1
        elif c.isascii() and c.isalpha():
            j = i
            while j < n and java_pattern[j] == c:
                j += 1
            by_length = _LETTERS.get(c, {})
            directive = by_length.get(j - i, by_length.get(None))
            if directive is None:
                raise ValueError(f"{java_pattern!r}: {c * (j - i)!r} is not supported (use y, M, d, H, h, a, m, s, "
                                 f"S, D, E, or quote literal text)")
            out.append(directive)
            i = j
        else:
            out.append("%%" if c == "%" else c)
            i += 1
    return "".join(out)


def pattern_references(pattern: str, partition_keys: Sequence[str]) -> list[str]:
    """The partition columns `pattern` names (`$dt $hour:00:00` -> [dt, hour]): each `$name` is the longest
    partition column its text starts with. ValueError naming a `$name` that is no partition column."""
    found: list[str] = []
    for m in _REFERENCE.finditer(pattern):
        key = _longest_key(m.group(1), partition_keys)
        if key is None:
            raise ValueError(f"{pattern!r} names ${m.group(1)}, which is not a partition column "
                             f"{list(partition_keys)}")
        found.append(key)
    return found


def _longest_key(text: str, keys: Sequence[str]) -> str | None:
    matches = [k for k in keys if text.startswith(k)]
    return max(matches, key=len) if matches else None


@dataclass(frozen=True)
class PartitionTimeExtractor:
    """A partition's time from its rendered values (see the module docstring). Build with `of`."""

    pattern: str | None
    formats: tuple[str, ...]
    formatter: str = DEFAULT_FORMATTER
    """The formatter as the user wrote it (for messages)."""

    @staticmethod
    def of(pattern: str | None, formatter: str | None) -> "PartitionTimeExtractor":
        """ValueError when `formatter` uses a letter `strptime_format` does not support."""
        if formatter is None:
            return PartitionTimeExtractor(pattern, DEFAULT_FORMATS)
        return PartitionTimeExtractor(pattern, (strptime_format(formatter),), formatter)

    def text(self, keys: Sequence[str], values: Sequence[str]) -> str:
        """The timestamp text of a partition: the pattern with its `$column`s replaced, or the first value."""
        if self.pattern is None:
            return values[0]
        by_key = dict(zip(keys, values))

        def value(m: re.Match[str]) -> str:
            key = _longest_key(m.group(1), keys)
            return m.group(0) if key is None else by_key[key] + m.group(1)[len(key):]

        return _REFERENCE.sub(value, self.pattern)

    def extract(self, keys: Sequence[str], values: Sequence[str]) -> dt.datetime:
        """The partition's time; ValueError when its text matches none of the formats."""
        text = self.text(keys, values)
        for fmt in self.formats:
            try:
                return dt.datetime.strptime(text, fmt)
            except ValueError:
                continue
        raise ValueError(f"{text!r} does not match the formatter {self.formatter!r}")


def expired_partitions(table: str, keys: Sequence[str], partitions: Iterable[Partition],
                       extractor: PartitionTimeExtractor, expiration_ms: int, now: dt.datetime) -> list[Partition]:
    """The partitions (rendered values, in `keys` order) whose time is before `now` - `expiration_ms`, oldest
    first. A partition whose time cannot be read is kept, with a warning naming it. Pure but for that log."""
    if not keys:
        return []
    cutoff = now - dt.timedelta(milliseconds=expiration_ms)
    out: list[tuple[dt.datetime, Partition]] = []
    for partition in sorted(set(partitions)):
        try:
            when = extractor.extract(keys, partition)
        except ValueError as e:
            shown = ",".join(f"{k}={v}" for k, v in zip(keys, partition))
            log.warning("table %s: partition %s is not expired: its time cannot be read (%s)", table, shown, e)
            continue
        if when < cutoff:
            out.append((when, partition))
    return [partition for _, partition in sorted(out)]


@dataclass(frozen=True)
class PartitionExpireResult:
    partitions: tuple[Partition, ...]
    """The partitions dropped (rendered values, in partition-key order)."""
    snapshot_id: int | None
    """The OVERWRITE snapshot that dropped them; None when nothing expired."""


def expire_partitions(store: "FileStore", policy: PartitionExpiry, now: dt.datetime) -> PartitionExpireResult:
    """Drop the expired partitions of the latest snapshot in one OVERWRITE commit (see the module docstring).
    `policy.expiration_ms` must be set; `now` is a wall-clock time without a zone."""
    if policy.expiration_ms is None:
        raise FileStoreError(f"table {store.table_name!r}: partition.expiration-time is not set")
    keys = store.schema.partition_keys
    latest = store.snapshots.latest()
    if not keys or latest is None:
        return PartitionExpireResult((), None)
    live = store.live_files(latest)
    extractor = PartitionTimeExtractor.of(policy.timestamp_pattern, policy.timestamp_formatter)
    chosen = expired_partitions(store.table_name, keys, (e.partition for e in live.entries.values()), extractor,
                                policy.expiration_ms, now)
    if not chosen:
        return PartitionExpireResult((), None)
    result = store.new_commit(f"partition-expire-{uuid.uuid4()}", new_user=True).publish(
        [], identifier=1, kind=CommitKind.OVERWRITE, overwrite=frozenset(chosen), base=live)
    log.info("table %s: expired %d partitions in snapshot %s", store.table_name, len(chosen), result.snapshot_id)
    return PartitionExpireResult(tuple(chosen), result.snapshot_id)
