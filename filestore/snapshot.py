"""Snapshot files: finding, reading and publishing them.

Invariants:
1. Snapshot ids start at 1 and are contiguous; `snapshot-<id>` is immutable once it exists.
2. Publishing is an exclusive create (`FileIO.create_exclusive`): of two writers racing for the same id exactly
   one wins; the other sees False and retries on top of the winner. Never "exists? then write".
3. `LATEST` and `EARLIEST` are hints: the latest snapshot is found by probing forward from the hint, the
   earliest by probing forward from its hint (expiration deletes from the front). A missing, empty or stale hint
   is normal (a fresh table, a crash between publishing and rewriting it); a hint that cannot be read or is not a
   number is damage, a CorruptFileError naming it (reads and commits stop until it is removed).
4. Rewriting a hint after its snapshot is published is best effort: the commit has happened, so a failure there
   is logged and the commit reports success. Raising would invite a retry that applies the same rows twice (an
   append or a count table) and a clean-up that deletes the published snapshot's files.
"""
from __future__ import annotations

import logging
from typing import Iterator

from filestore.errors import CorruptFileError, SnapshotNotFoundError
from filestore.fileio import FileIO
from filestore.meta import Snapshot
from filestore.paths import TablePaths, snapshot_id_of

log = logging.getLogger(__name__)

LATEST = "LATEST"
EARLIEST = "EARLIEST"


class SnapshotManager:
    def __init__(self, io: FileIO, paths: TablePaths, table_name: str) -> None:
        self.io = io
        self.paths = paths
        self.table_name = table_name

    def _hint(self, name: str) -> int | None:
        """The hint's id; None when the hint is missing or empty (a fresh table, a crash before the first hint,
        a torn rewrite). A hint that cannot be read (e.g. a directory in its place) or does not hold a number is
        a CorruptFileError naming it and the table: the snapshots are intact, and removing the hint repairs it.
        A hint that is only stale (behind, or naming an expired snapshot) is probed past."""
        path = self.paths.hint_file(name)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise CorruptFileError(path, f"unreadable {name} hint ({e}); the snapshots are intact: remove the "
                                   "hint and the latest snapshot is found by listing", self.table_name) from None
        text = data.decode(errors="replace").strip()
        if not text:
            return None
        try:
            return int(text)
        except ValueError:
            raise CorruptFileError(path, f"the {name} hint holds {text[:40]!r}, not a snapshot id; the snapshots are "
                                   "intact: remove the hint and the latest snapshot is found by listing",
                                   self.table_name) from None

    def _listed_ids(self) -> list[int]:
        ids = (snapshot_id_of(s.path.rsplit("/", 1)[-1]) for s in self.io.list_dir(self.paths.snapshot_dir))
        return sorted(i for i in ids if i is not None)

    def exists(self, snapshot_id: int) -> bool:
        return self.io.exists(self.paths.snapshot_file(snapshot_id))

    def latest_id(self) -> int | None:
        hint = self._hint(LATEST)
        if hint is None or not self.exists(hint):
            return self._listed_latest_id()
        return self._walk(hint)

    def _walk(self, snapshot_id: int) -> int:
        """The last of the snapshots that follow `snapshot_id` (an existing one) without a gap."""
        while self.exists(snapshot_id + 1):
            snapshot_id += 1
        return snapshot_id

    def _listed_latest_id(self) -> int | None:
        ids = self._listed_ids()
        return self._walk(ids[-1]) if ids else None

    def earliest_id(self) -> int | None:
        hint = self._hint(EARLIEST)
        latest = self.latest_id()
        if latest is None:
            return None
        if hint is not None and hint <= latest:
            candidate = hint
            while candidate <= latest and not self.exists(candidate):
                candidate += 1
            if candidate <= latest and (candidate == 1 or not self.exists(candidate - 1)):
                return candidate
        ids = self._listed_ids()
        return ids[0] if ids else None

    def get(self, snapshot_id: int) -> Snapshot:
        path = self.paths.snapshot_file(snapshot_id)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise SnapshotNotFoundError(
                f"table {self.table_name!r} has no snapshot {snapshot_id} (never written or expired)"
            ) from None
        except OSError as e:
            raise CorruptFileError(path, f"unreadable: {e}", self.table_name) from None
        try:
            text = data.decode()
        except UnicodeDecodeError as e:
            raise CorruptFileError(path, f"not a snapshot: {e}", self.table_name) from None
        return Snapshot.from_json(text, path)

    def latest(self) -> Snapshot | None:
        """`get(latest_id())` with one request fewer when the LATEST hint names the latest snapshot (the usual case):
        its file is read rather than first probed."""
        hint = self._hint(LATEST)
        if hint is not None and self.exists(hint + 1):
            return self.get(self._walk(hint + 1))
        if hint is not None:
            try:
                return self.get(hint)
            except SnapshotNotFoundError:
                pass   # a hint naming no snapshot (stale and expired, or ahead): the listing finds the latest
        sid = self._listed_latest_id()
        return None if sid is None else self.get(sid)

    def snapshots(self) -> Iterator[Snapshot]:
        """Every retained snapshot, oldest first."""
        earliest, latest = self.earliest_id(), self.latest_id()
        if earliest is None or latest is None:
            return
        for sid in range(earliest, latest + 1):
            if self.exists(sid):
                yield self.get(sid)

    def at_or_before(self, timestamp_ms: int) -> Snapshot:
        """The latest snapshot committed at or before `timestamp_ms` (time travel)."""
        found: Snapshot | None = None
        for s in self.snapshots():
            if s.time_millis <= timestamp_ms:
                found = s
            else:
                break
        if found is None:
            raise SnapshotNotFoundError(
                f"table {self.table_name!r} has no snapshot at or before timestamp {timestamp_ms} ms"
            )
        return found

    def try_publish(self, snapshot: Snapshot) -> bool:
        """Atomically create `snapshot-<id>`; False if another writer published that id first."""
        won = self.io.create_exclusive(self.paths.snapshot_file(snapshot.id), snapshot.to_json().encode())
        if won:
            self._set_hint(LATEST, snapshot.id)
        return won

    def _set_hint(self, name: str, snapshot_id: int) -> None:
        """Best effort (invariant 4): the snapshot is published already. A hint left stale is probed past; one
        left damaged (e.g. a directory in its place) is reported by the next read, naming it."""
        try:
            self.io.replace_hint(self.paths.hint_file(name), str(snapshot_id).encode())
        except OSError as e:
            log.warning("table %s: could not update the hint %s: %s", self.table_name, self.paths.hint_file(name), e)

    def set_earliest_hint(self, snapshot_id: int) -> None:
        self._set_hint(EARLIEST, snapshot_id)

    def delete(self, snapshot_id: int) -> None:
        self.io.delete(self.paths.snapshot_file(snapshot_id))
