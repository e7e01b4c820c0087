"""The live files of one snapshot, as a value: read once from its manifests, then passed down.

Invariants:
1. `LiveFiles` describes exactly one snapshot (or the empty table when `snapshot` is None) and never changes.
2. It is built by reading that snapshot's manifest lists and manifests once (`read_live_files`), or derived
   without any read from its parent's value and the entries a commit added (`LiveFiles.after`).
3. Everything a write needs of its base snapshot comes from it: the sequence numbers per bucket (new_write), the
   compaction plan, and the commit's validation and manifest list.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Collection, Iterable, Mapping

from filestore.manifest import ManifestIO, live_entries
from filestore.meta import DataFileMeta, FileKind, ManifestEntry, ManifestFileMeta, Partition, Snapshot

FileKey = tuple[Partition, int, str]
Bucket = tuple[Partition, int]


@dataclass(frozen=True, eq=False)
class LiveFiles:
    """The live data files of `snapshot`, keyed by (partition, bucket, file name), and the manifests naming them."""

    snapshot: Snapshot | None
    manifests: tuple[ManifestFileMeta, ...] = ()
    entries: Mapping[FileKey, ManifestEntry] = field(default_factory=dict)

    @property
    def snapshot_id(self) -> int | None:
        return None if self.snapshot is None else self.snapshot.id

    def max_sequence_numbers(self) -> dict[Bucket, int]:
        """Per (partition, bucket), the highest sequence number of its live files."""
        out: dict[Bucket, int] = {}
        for e in self.entries.values():
            where = (e.partition, e.bucket)
            out[where] = max(out.get(where, -1), e.file.max_sequence_number)
        return out

    def files_by_bucket(self, buckets: Collection[Bucket] | None = None) -> dict[Bucket, list[DataFileMeta]]:
        """The live files of each bucket (of `buckets` only, when given)."""
        grouped: dict[Bucket, list[DataFileMeta]] = defaultdict(list)
        for e in self.entries.values():
            where = (e.partition, e.bucket)
            if buckets is None or where in buckets:
                grouped[where].append(e.file)
        return dict(grouped)

    def after(self, snapshot: Snapshot, manifests: Iterable[ManifestFileMeta],
              delta: Iterable[ManifestEntry]) -> "LiveFiles":
        """The live files of `snapshot`, the child of this one that applied `delta` (no read)."""
        entries = dict(self.entries)
        for e in delta:
            if e.kind == FileKind.ADD:
                entries[e.identifier] = e
            else:
                entries.pop(e.identifier, None)
        return LiveFiles(snapshot, tuple(manifests), entries)


def read_live_files(manifests: ManifestIO, snapshot: Snapshot | None) -> LiveFiles:
    """Read `snapshot`'s manifest lists and manifests, once."""
    if snapshot is None:
        return LiveFiles(None)
    metas = manifests.read_manifest_list(snapshot.base_manifest_list) + manifests.read_manifest_list(
        snapshot.delta_manifest_list
    )
    entries = live_entries(e for m in metas for e in manifests.read_manifest(m.file_name))
    return LiveFiles(snapshot, tuple(metas), entries)
