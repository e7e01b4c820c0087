"""The typed options the file store runs with. Declared (key, type, default, doc) and parsed once in
`catalog.options`; the file store only ever sees this frozen value."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from filestore.merge_engine import MergeEngine


ExpirationStrategy = Literal["values-time"]


@dataclass(frozen=True)
class PartitionExpiry:
    """The partition-expiry options of a table, typed (declared in catalog.options)."""

    expiration_ms: int | None = None
    """`partition.expiration-time`; None: partitions never expire."""
    check_interval_ms: int = 3_600_000
    """`partition.expiration-check-interval`: how often the service checks."""
    timestamp_pattern: str | None = None
    """`partition.timestamp-pattern`; None: the first partition column's value."""
    timestamp_formatter: str | None = None
    """`partition.timestamp-formatter` (Java DateTimeFormatter); None: `yyyy-MM-dd HH:mm:ss` or `yyyy-MM-dd`."""
    strategy: ExpirationStrategy = "values-time"


@dataclass(frozen=True)
class FileStoreOptions:
    bucket: int
    file_format: str
    file_compression: str
    write_buffer_size: int
    target_file_size: int
    commit_max_retries: int
    manifest_merge_min_count: int
    snapshot_num_retained_min: int
    snapshot_num_retained_max: int
    snapshot_time_retained_ms: int
    compaction_trigger: int
    compaction_max_size_amplification_percent: int
    compaction_size_ratio: int
    write_only: bool = False
    num_sorted_run_stop_trigger: int | None = None  # None: compaction_trigger + 3
    commit_timeout_ms: int = 60_000  # retries go on while this time or the count is left
    commit_min_retry_wait_ms: int = 10
    commit_max_retry_wait_ms: int = 10_000
    merge_engine: MergeEngine = field(default_factory=MergeEngine)  # fixed at creation: how a key's records merge
    unavailable_value_placeholder: str = ""  # a changelog's "unchanged" value (filestore.unchanged); "": none
    deletion_vectors: bool = False  # fixed at creation: reads skip deleted positions, no merge (filestore.deletion)
    delta_metadata: bool = False  # every snapshot also a Delta Lake version (filestore.views.delta)
    iceberg_metadata: bool = False  # every snapshot also an Iceberg snapshot (filestore.views.iceberg)
    partition_expiry: PartitionExpiry = field(default_factory=PartitionExpiry)  # filestore.partition_expire
    consumer_expiration_ms: int | None = None  # filestore.consumers; None: consumers never expire

    @property
    def stop_trigger(self) -> int:
        """Sorted runs of a bucket at which a write waits for compaction."""
        if self.num_sorted_run_stop_trigger is None:
            return self.compaction_trigger + 3
        return self.num_sorted_run_stop_trigger
