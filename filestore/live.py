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
from dataclasses import dataclass, field, replace
from typing import Collection, Iterable, Mapping

from filestore.manifest import ManifestIO, live_entries
from filestore.meta import (DataFileMeta, DeletionVectorRef, ManifestEntry, ManifestFileMeta, Partition,
                            Snapshot)

FileKey = tuple[Partition, int, str]
Bucket = tuple[Partition, int]


@dataclass(frozen=True, eq=False)
class LiveFiles:
    """The live data files of `snapshot`, keyed by (partition, bucket, file name), and the manifests naming them;
    with deletion vectors (filestore.deletion), the vector of each file with deleted rows as of `snapshot`."""

    snapshot: Snapshot | None
    manifests: tuple[ManifestFileMeta, ...] = ()
    entries: Mapping[FileKey, ManifestEntry] = field(default_factory=dict)
    deletion_vectors: Mapping[FileKey, DeletionVectorRef] = field(default_factory=dict)

    @property
    def deletion_vector_index(self) -> str | None:
        return None if self.snapshot is None else self.snapshot.deletion_vectors

    def file(self, key: FileKey) -> DataFileMeta:
        """The live file `key` as a read of this snapshot sees it (with its deletion vector, if any)."""
        f = self.entries[key].file
        dv = self.deletion_vectors.get(key)
        return f if dv is None else replace(f, deletion_vector=dv)

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
        for key, e in self.entries.items():
            where = (e.partition, e.bucket)
            if buckets is None or where in buckets:
                grouped[where].append(self.file(key))
        return dict(grouped)

    def after(self, snapshot: Snapshot, manifests: Iterable[ManifestFileMeta],
              delta: Iterable[ManifestEntry],
              deletion_vectors: Mapping[FileKey, DeletionVectorRef] | None = None) -> "LiveFiles":
        """The live files of `snapshot`, the child of this one that applied `delta` (no read); `deletion_vectors`:
        its vectors (default: this one's, of the files still live)."""
        entries = live_entries(delta, self.entries)
        if deletion_vectors is None:
            deletion_vectors = {k: v for k, v in self.deletion_vectors.items() if k in entries}
        return LiveFiles(snapshot, tuple(manifests), entries, deletion_vectors)


def read_live_files(manifests: ManifestIO, snapshot: Snapshot | None) -> LiveFiles:
    """Read `snapshot`'s manifest lists, manifests and deletion-vector index, once."""
    if snapshot is None:
        return LiveFiles(None)
    metas = manifests.read_manifest_list(snapshot.base_manifest_list) + manifests.read_manifest_list(
        snapshot.delta_manifest_list
    )
    entries = live_entries(e for m in metas for e in manifests.read_manifest(m.file_name))
    vectors = manifests.read_dv_index(snapshot.deletion_vectors) if snapshot.deletion_vectors else {}
    return LiveFiles(snapshot, tuple(metas), entries, vectors)
