"""Tags: named snapshots that outlive snapshot expiry (Paimon's tags).

    <table>/tag/tag-<name>     JSON: the tagged snapshot, exactly as its `snapshot/snapshot-<id>` file holds it,
                               plus `tagCreateTime` (epoch ms, on-disk name) when the tag was made

Invariants:
1. A tag file is immutable: created by an exclusive create (`FileIO.create_exclusive`: a hard link locally, a
   conditional put on S3), never replaced; of two creators of one name exactly one wins, the other gets
   TagExistsError. Never "exists? then write".
2. A tag name is not empty, holds no '/' or '\\' and is not a number (so `VERSION AS OF '5'` stays a snapshot id).
3. Every file a tag's snapshot references (data files, manifests, manifest lists, the deletion-vector index and the
   vector files it names) outlives the snapshot: expiry and orphan removal (filestore.expire) keep them; reading a
   tag reads its copy of the snapshot, so it returns what reading the snapshot returned.
4. Creating a tag and expiring its snapshot may race. The creator publishes the tag, then checks that the snapshot
   file still exists; expiry deletes snapshot files first and only then lists the tags whose files it keeps. So
   either expiry sees the tag (its files survive), or the creator sees the snapshot gone: it removes its tag and
   fails (the files may be deleted already).
5. Deleting a tag removes its file first, then, when its snapshot has expired, the files only that snapshot used:
   none that a retained snapshot or another tag references. A crash in between leaves unreferenced files, which
   orphan removal deletes later.

`TagManager` reads and writes tag files and lists the tags in creation order; `create_tag` / `delete_tag`
(filestore.tagging) are the operations the table API, SQL and an automatic tagger (the service) use.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from filestore.errors import CorruptFileError, TagError, TagNotFoundError
from filestore.fileio import FileIO
from filestore.meta import Snapshot
from filestore.paths import TablePaths, tag_name_of

CREATE_TIME_FIELD = "tagCreateTime"
"""On-disk: when the tag was made (epoch ms), next to the snapshot's own fields."""


@dataclass(frozen=True)
class Tag:
    """One tag: its name, its copy of the snapshot and when it was made (epoch ms)."""

    name: str
    snapshot: Snapshot
    create_time_millis: int

    def to_json(self) -> str:
        d = json.loads(self.snapshot.to_json())
        d[CREATE_TIME_FIELD] = self.create_time_millis
        return json.dumps(d, indent=2)

    @staticmethod
    def from_json(name: str, text: str, path: str) -> "Tag":
        snapshot = Snapshot.from_json(text, path)
        try:
            created = int(json.loads(text).get(CREATE_TIME_FIELD, snapshot.time_millis))
        except (ValueError, TypeError, AttributeError) as e:
            raise CorruptFileError(path, f"not a tag: {e}") from None
        return Tag(name, snapshot, created)


def check_tag_name(table: str, name: object) -> str:
    """`name` if it may name a tag (invariant 2), else TagError."""
    if not isinstance(name, str) or not name.strip():
        raise TagError(table, str(name), "is not a tag name: give a non-empty text")
    if "/" in name or "\\" in name or name != name.strip() or name.startswith("."):
        raise TagError(table, name, "is not a tag name: no '/', '\\', leading '.' or surrounding spaces")
    if name.isdigit():
        raise TagError(table, name, "is not a tag name: a number would read as a snapshot id in VERSION AS OF")
    return name


class TagManager:
    def __init__(self, io: FileIO, paths: TablePaths, table_name: str) -> None:
        self.io = io
        self.paths = paths
        self.table_name = table_name

    def names(self) -> list[str]:
        found = (tag_name_of(s.path.rsplit("/", 1)[-1]) for s in self.io.list_dir(self.paths.tag_dir))
        return sorted(n for n in found if n is not None)

    def exists(self, name: str) -> bool:
        return self.io.exists(self.paths.tag_file(name))

    def get(self, name: str) -> Tag:
        path = self.paths.tag_file(name)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            known = self.names()
            listed = f" (its tags: {', '.join(known[:10])}{' ...' if len(known) > 10 else ''})" if known else \
                " (it has no tags)"
            raise TagNotFoundError(self.table_name, name, f"does not exist{listed}") from None
        except OSError as e:
            raise CorruptFileError(path, f"unreadable: {e}", self.table_name) from None
        try:
            return Tag.from_json(name, data.decode(), path)
        except UnicodeDecodeError as e:
            raise CorruptFileError(path, f"not a tag: {e}", self.table_name) from None

    def tags(self) -> list[Tag]:
        """Every tag, in the order they were made (then by name); a tag deleted while listing is left out."""
        out = []
        for name in self.names():
            try:
                out.append(self.get(name))
            except TagNotFoundError:
                continue
        return sorted(out, key=lambda t: (t.create_time_millis, t.name))

    def tagged(self, snapshot_id: int) -> Snapshot | None:
        """A tag's copy of snapshot `snapshot_id` (what reads it once the snapshot expired), or None."""
        for tag in self.tags():
            if tag.snapshot.id == snapshot_id:
                return tag.snapshot
        return None

    def try_create(self, tag: Tag) -> bool:
        """Publish `tag` (invariant 1); False when a tag of its name exists."""
        return self.io.create_exclusive(self.paths.tag_file(tag.name), tag.to_json().encode())

    def delete_file(self, name: str) -> None:
        self.io.delete(self.paths.tag_file(name))

