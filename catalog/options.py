"""Every table option, declared once (key, type, default, doc), and their parsing into `TableOptions`.

Session-level defaults carry the `table-storage.` prefix (FLIP-188 "Configuration"); per-table options do not
and win over session ones. `docs/options.md` is generated from `ALL_OPTIONS` (`python -m catalog.docgen`).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

from catalog.errors import InvalidOptionError
from catalog.optiontypes import ConfigOption
from filestore.options import FileStoreOptions

SESSION_PREFIX = "table-storage."
T = TypeVar("T")

BUCKET: ConfigOption[int] = ConfigOption(
    "bucket", "int", "1",
    "Number of buckets of the file store, and of partitions of the table's Kafka topic. A record goes to a bucket "
    "by the hash of its primary key (or of the whole row without one). Fixed once the table is created.",
)
FILE_FORMAT: ConfigOption[str] = ConfigOption(
    "file.format", "enum", "parquet", "Format of the data files.", choices=("parquet", "orc")
)
FILE_COMPRESSION: ConfigOption[str] = ConfigOption(
    "file.compression", "enum", "zstd", "Compression codec of the data files.",
    choices=("zstd", "snappy", "lz4", "gzip", "none"),
)
WRITE_BUFFER_SIZE: ConfigOption[int] = ConfigOption(
    "write-buffer-size", "memory", "64 mb",
    "In-memory size of a bucket's memtable before it is flushed into a new sorted run.",
)
TARGET_FILE_SIZE: ConfigOption[int] = ConfigOption(
    "target-file-size", "memory", "128 mb", "Size at which a sorted run rolls over to a new data file."
)
COMMIT_MAX_RETRIES: ConfigOption[int] = ConfigOption(
    "commit.max-retries", "int", "10",
    "How many times a commit retries when other writers published a snapshot first.",
)
MANIFEST_MERGE_MIN_COUNT: ConfigOption[int] = ConfigOption(
    "manifest.merge-min-count", "int", "30",
    "When a snapshot would reference more manifests than this, they are merged into one of live files only.",
)
SNAPSHOT_NUM_RETAINED_MIN: ConfigOption[int] = ConfigOption(
    "snapshot.num-retained.min", "int", "10", "Minimum number of snapshots expiration always keeps."
)
SNAPSHOT_NUM_RETAINED_MAX: ConfigOption[int] = ConfigOption(
    "snapshot.num-retained.max", "int", "2147483647", "Maximum number of snapshots expiration keeps."
)
SNAPSHOT_TIME_RETAINED: ConfigOption[int] = ConfigOption(
    "snapshot.time-retained", "duration", "1 h",
    "Snapshots younger than this are kept (between the minimum and maximum counts).",
)
COMPACTION_TRIGGER: ConfigOption[int] = ConfigOption(
    "num-sorted-run.compaction-trigger", "int", "5",
    "Universal compaction: sorted runs in a bucket above which runs are merged.",
)
COMPACTION_MAX_SIZE_AMP: ConfigOption[int] = ConfigOption(
    "compaction.max-size-amplification-percent", "int", "200",
    "Universal compaction: full compaction when the size of all runs but the oldest exceeds this percentage of "
    "the oldest run.",
)
COMPACTION_SIZE_RATIO: ConfigOption[int] = ConfigOption(
    "compaction.size-ratio", "int", "1",
    "Universal compaction: percentage flexibility when comparing sorted-run sizes for a size-ratio compaction.",
)

WRITE_ONLY: ConfigOption[bool] = ConfigOption(
    "write-only", "boolean", "false",
    "When true, writes never compact: compaction is left to `tablestore compact` or a dedicated job.",
)

ALL_OPTIONS: tuple[ConfigOption[Any], ...] = (
    BUCKET, FILE_FORMAT, FILE_COMPRESSION, WRITE_BUFFER_SIZE, TARGET_FILE_SIZE, COMMIT_MAX_RETRIES,
    MANIFEST_MERGE_MIN_COUNT, SNAPSHOT_NUM_RETAINED_MIN, SNAPSHOT_NUM_RETAINED_MAX, SNAPSHOT_TIME_RETAINED,
    COMPACTION_TRIGGER, COMPACTION_MAX_SIZE_AMP, COMPACTION_SIZE_RATIO, WRITE_ONLY,
)


def find_option(key: str) -> ConfigOption[Any] | None:
    return next((o for o in ALL_OPTIONS if o.matches(key)), None)


def _unknown(key: str, where: str) -> InvalidOptionError:
    valid = sorted(o.key + (".<name>" if o.type == "map" else "") for o in ALL_OPTIONS)
    close = difflib.get_close_matches(key, [o.key for o in ALL_OPTIONS], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return InvalidOptionError(f"unknown {where} option {key!r}{hint}; valid options: {', '.join(valid)}")


def validate_table_options(options: Mapping[str, str], where: str = "table") -> dict[str, str]:
    """Check every key is declared and every value parses; returns the options as plain strings."""
    out: dict[str, str] = {}
    for key, value in options.items():
        opt = find_option(key)
        if opt is None:
            raise _unknown(key, where)
        value = str(value).lower() if isinstance(value, bool) else str(value)
        if opt.type != "map":
            opt.parse(value)
        out[key] = value
    return out


def session_defaults(session_options: Mapping[str, str]) -> dict[str, str]:
    """Strip the `table-storage.` prefix of session options; any other key is an error."""
    stripped = {}
    for key, value in session_options.items():
        if not key.startswith(SESSION_PREFIX):
            raise InvalidOptionError(
                f"session option {key!r} must start with {SESSION_PREFIX!r} (e.g. 'table-storage.bucket')"
            )
        stripped[key[len(SESSION_PREFIX):]] = value
    return validate_table_options(stripped, "session")


@dataclass(frozen=True)
class TableOptions:
    """The options of one table, typed. Built once when a table is created or loaded."""

    raw: Mapping[str, str]

    def get(self, option: ConfigOption[T]) -> T:
        value = self.raw.get(option.key, option.default)
        if value is None:
            raise InvalidOptionError(f"option {option.key!r} has no value and no default")
        return option.parse(value)

    def get_optional(self, option: ConfigOption[T]) -> T | None:
        value = self.raw.get(option.key, option.default)
        return None if value is None else option.parse(value)

    def map_option(self, option: ConfigOption[Any]) -> dict[str, str]:
        prefix = option.key + "."
        return {k[len(prefix):]: v for k, v in self.raw.items() if k.startswith(prefix)}

    @property
    def bucket(self) -> int:
        return self.get(BUCKET)

    def to_filestore(self) -> FileStoreOptions:
        g = self.get
        return FileStoreOptions(
            bucket=g(BUCKET),
            file_format=g(FILE_FORMAT),
            file_compression=g(FILE_COMPRESSION),
            write_buffer_size=g(WRITE_BUFFER_SIZE),
            target_file_size=g(TARGET_FILE_SIZE),
            commit_max_retries=g(COMMIT_MAX_RETRIES),
            manifest_merge_min_count=g(MANIFEST_MERGE_MIN_COUNT),
            snapshot_num_retained_min=g(SNAPSHOT_NUM_RETAINED_MIN),
            snapshot_num_retained_max=g(SNAPSHOT_NUM_RETAINED_MAX),
            snapshot_time_retained_ms=g(SNAPSHOT_TIME_RETAINED),
            compaction_trigger=g(COMPACTION_TRIGGER),
            compaction_max_size_amplification_percent=g(COMPACTION_MAX_SIZE_AMP),
            compaction_size_ratio=g(COMPACTION_SIZE_RATIO),
            write_only=g(WRITE_ONLY),
        )
