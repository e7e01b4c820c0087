"""The one owner of the file store's directory layout and file names (on-disk format: do not change names).

    <table>/schema/schema-<id>                          JSON, one per schema version
    <table>/snapshot/snapshot-<id>                      JSON, ids start at 1 and are contiguous
    <table>/snapshot/LATEST, EARLIEST                   hints only: readers verify by probing
    <table>/manifest/manifest-<uuid>-<n>.avro           Avro: added/deleted data files
    <table>/manifest/manifest-list-<uuid>-<n>.avro      Avro: manifest files of a snapshot
    <table>/<k1>=<v1>/<k2>=<v2>/bucket-<b>/data-<uuid>-<n>.<format>
    <table>/tag/tag-<name>                              JSON: a copy of the tagged snapshot's file (filestore.tags)
    <table>/consumer/consumer-<id>                      JSON: a consumer's progress (filestore.consumers): never
                                                        data, never an orphan
    <table>/checkpoint/<job>/...                        streaming jobs' own state (`tablestore ingest`'s Spark
                                                        checkpoints): never data, never an orphan
    <table>/service/lease-<epoch>                       which `tablestore service` runs the table's duties
                                                        (filestore.lease): never data, never an orphan
    <table>/report/report-<job>                         JSON: a job's latest progress report (filestore.reports):
                                                        never data, never an orphan

Partition values are rendered Hive-style (filestore.partition: Arrow's cast to string, a null as
__DEFAULT_PARTITION__, a string that would read as it marked with a trailing '%'), with the characters Hive escapes
written as %XX in directory names.
"""
from __future__ import annotations

import itertools
import uuid
from typing import Sequence

DEFAULT_PARTITION = "__DEFAULT_PARTITION__"
SNAPSHOT_PREFIX = "snapshot-"
SCHEMA_PREFIX = "schema-"
LEASE_PREFIX = "lease-"
TAG_PREFIX = "tag-"
CONSUMER_PREFIX = "consumer-"
REPORT_PREFIX = "report-"
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)}


def escape_partition_value(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def unescape_partition_value(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "%" and i + 2 < len(value):
            out.append(chr(int(value[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


class TablePaths:
    """Paths of one table; `root` is the table directory as a FileIO path."""

    def __init__(self, root: str, file_format: str = "parquet") -> None:
        self.root = root.rstrip("/")
        self.file_format = file_format
        self._writer_id = uuid.uuid4().hex
        self._counter = itertools.count()

    @property
    def schema_dir(self) -> str:
        return f"{self.root}/schema"

    @property
    def checkpoint_dir(self) -> str:
        return f"{self.root}/checkpoint"

    @property
    def service_dir(self) -> str:
        return f"{self.root}/service"

    def lease_file(self, epoch: int) -> str:
        return f"{self.service_dir}/{LEASE_PREFIX}{epoch}"

    @property
    def snapshot_dir(self) -> str:
        return f"{self.root}/snapshot"

    @property
    def manifest_dir(self) -> str:
        return f"{self.root}/manifest"

    @property
    def tag_dir(self) -> str:
        return f"{self.root}/tag"

    def tag_file(self, name: str) -> str:
        return f"{self.tag_dir}/{TAG_PREFIX}{name}"

    @property
    def consumer_dir(self) -> str:
        return f"{self.root}/consumer"

    def consumer_file(self, consumer_id: str) -> str:
        return f"{self.consumer_dir}/{CONSUMER_PREFIX}{consumer_id}"

    @property
    def report_dir(self) -> str:
        return f"{self.root}/report"

    def report_file(self, job: str) -> str:
        return f"{self.report_dir}/{REPORT_PREFIX}{job}"

    def schema_file(self, schema_id: int) -> str:
        return f"{self.schema_dir}/{SCHEMA_PREFIX}{schema_id}"

    def snapshot_file(self, snapshot_id: int) -> str:
        return f"{self.snapshot_dir}/{SNAPSHOT_PREFIX}{snapshot_id}"

    def hint_file(self, name: str) -> str:
        return f"{self.snapshot_dir}/{name}"

    def manifest_file(self, name: str) -> str:
        return f"{self.manifest_dir}/{name}"

    def new_manifest_name(self) -> str:
        return f"manifest-{self._writer_id}-{next(self._counter)}.avro"

    def new_manifest_list_name(self) -> str:
        return f"manifest-list-{self._writer_id}-{next(self._counter)}.avro"

    def bucket_dir(self, partition_keys: Sequence[str], partition: Sequence[str], bucket: int) -> str:
        parts = "".join(f"{k}={escape_partition_value(v)}/" for k, v in zip(partition_keys, partition))
        return f"{self.root}/{parts}bucket-{bucket}"

    def new_data_file_name(self) -> str:
        return f"data-{self._writer_id}-{next(self._counter)}.{self.file_format}"

    def data_file(self, partition_keys: Sequence[str], partition: Sequence[str], bucket: int, name: str) -> str:
        return f"{self.bucket_dir(partition_keys, partition, bucket)}/{name}"


def snapshot_id_of(file_name: str) -> int | None:
    """The id in `snapshot-<id>`, or None for any other name (hints, temp files)."""
    if not file_name.startswith(SNAPSHOT_PREFIX):
        return None
    rest = file_name[len(SNAPSHOT_PREFIX) :]
    return int(rest) if rest.isdigit() else None


def tag_name_of(file_name: str) -> str | None:
    """The name in `tag-<name>`, or None for any other file (a temp file of an exclusive create)."""
    if not file_name.startswith(TAG_PREFIX) or file_name.endswith(".tmp"):
        return None
    return file_name[len(TAG_PREFIX):] or None


def consumer_id_of(file_name: str) -> str | None:
    """The id in `consumer-<id>`, or None for any other file (a temp file of an atomic overwrite)."""
    if not file_name.startswith(CONSUMER_PREFIX) or file_name.endswith(".tmp"):
        return None
    return file_name[len(CONSUMER_PREFIX):] or None


def report_job_of(file_name: str) -> str | None:
    """The job in `report-<job>`, or None for any other file (a temp file of an atomic overwrite)."""
    if not file_name.startswith(REPORT_PREFIX) or file_name.endswith(".tmp"):
        return None
    return file_name[len(REPORT_PREFIX):] or None


def schema_id_of(file_name: str) -> int | None:
    if not file_name.startswith(SCHEMA_PREFIX):
        return None
    rest = file_name[len(SCHEMA_PREFIX) :]
    return int(rest) if rest.isdigit() else None


def lease_epoch_of(file_name: str) -> int | None:
    """The epoch in `lease-<epoch>`, or None for any other name (temp files)."""
    if not file_name.startswith(LEASE_PREFIX):
        return None
    rest = file_name[len(LEASE_PREFIX) :]
    return int(rest) if rest.isdigit() else None
