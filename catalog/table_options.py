"""The options of one table, typed: what the file store, the log store and the merge engine read from them
(their declarations and checks: `catalog.options`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, TypeVar, cast

from catalog.errors import InvalidOptionError
from catalog.options import (BUCKET, COMMIT_MAX_RETRIES, COMMIT_MAX_RETRY_WAIT, COMMIT_MIN_RETRY_WAIT, COMMIT_TIMEOUT,
                             COMPACTION_MAX_SIZE_AMP, COMPACTION_SIZE_RATIO, COMPACTION_TRIGGER, DELETION_VECTORS, DELTA_METADATA, FIELDS,
                             ICEBERG_METADATA, FILE_COMPRESSION,
                             FILE_FORMAT, INGEST_UNAVAILABLE_VALUE, MANIFEST_MERGE_MIN_COUNT, MERGE_ENGINE, SEQUENCE_FIELD,
                             SNAPSHOT_NUM_RETAINED_MAX, SNAPSHOT_NUM_RETAINED_MIN, SNAPSHOT_TIME_RETAINED, STOP_TRIGGER,
                             TARGET_FILE_SIZE, WRITE_BUFFER_SIZE, WRITE_ONLY)
from catalog.options import CONSUMER_EXPIRATION_TIME
from catalog.optiontypes import ConfigOption
from catalog.options import (PARTITION_EXPIRATION_CHECK_INTERVAL, PARTITION_EXPIRATION_STRATEGY,
                             PARTITION_EXPIRATION_TIME, PARTITION_TIMESTAMP_FORMATTER, PARTITION_TIMESTAMP_PATTERN)
from filestore import EngineName, ExpirationStrategy, FileStoreOptions, MergeEngine, PartitionExpiry

T = TypeVar("T")


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
        stop_trigger = self.get_optional(STOP_TRIGGER)
        if stop_trigger is None:
            stop_trigger = g(COMPACTION_TRIGGER) + 3
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
            num_sorted_run_stop_trigger=stop_trigger,
            commit_timeout_ms=g(COMMIT_TIMEOUT),
            commit_min_retry_wait_ms=g(COMMIT_MIN_RETRY_WAIT),
            commit_max_retry_wait_ms=g(COMMIT_MAX_RETRY_WAIT),
            compaction_max_size_amplification_percent=g(COMPACTION_MAX_SIZE_AMP),
            compaction_size_ratio=g(COMPACTION_SIZE_RATIO),
            write_only=g(WRITE_ONLY),
            merge_engine=self.merge_engine(),
            unavailable_value_placeholder=g(INGEST_UNAVAILABLE_VALUE),
            deletion_vectors=g(DELETION_VECTORS),
            delta_metadata=g(DELTA_METADATA),
            iceberg_metadata=g(ICEBERG_METADATA) == "table-location",
            partition_expiry=self.partition_expiry(),
            consumer_expiration_ms=self.get_optional(CONSUMER_EXPIRATION_TIME),
        )

    def partition_expiry(self) -> PartitionExpiry:
        """The table's `partition.*` expiry options (checked against its partition columns at CREATE and ALTER:
        catalog.partition_options)."""
        return PartitionExpiry(
            expiration_ms=self.get_optional(PARTITION_EXPIRATION_TIME),
            check_interval_ms=self.get(PARTITION_EXPIRATION_CHECK_INTERVAL),
            timestamp_pattern=self.get_optional(PARTITION_TIMESTAMP_PATTERN),
            timestamp_formatter=self.get_optional(PARTITION_TIMESTAMP_FORMATTER),
            strategy=cast(ExpirationStrategy, self.get(PARTITION_EXPIRATION_STRATEGY)),
        )

    def merge_engine(self) -> MergeEngine:
        """The table's merge engine as the file store applies it (checked against the schema at creation:
        catalog.merge_options)."""
        functions = self.map_option(FIELDS)
        aggregates = tuple(sorted((k[: -len(AGGREGATE_SUFFIX)], v.strip().lower()) for k, v in functions.items()
                                  if k.endswith(AGGREGATE_SUFFIX)))
        name = cast(EngineName, self.get(MERGE_ENGINE))  # one of ENGINES: the option's choices
        return MergeEngine(name, sequence_fields(self.get_optional(SEQUENCE_FIELD)), aggregates)


AGGREGATE_SUFFIX = ".aggregate-function"


def sequence_fields(value: str | None) -> tuple[str, ...]:
    """The columns of a `sequence.field` value ("a, b" -> ("a", "b"))."""
    return tuple(c.strip() for c in (value or "").split(",") if c.strip())
