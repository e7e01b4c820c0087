"""Snapshot files: finding, reading and publishing them.

Invariants:
1. Snapshot ids start at 1 and are contiguous; `snapshot-<id>` is immutable once it exists.
2. Publishing is an exclusive create (`FileIO.create_exclusive`): of two writers racing for the same id exactly
   one wins; the other sees False and retries on top of the winner. Never "exists? then write".
3. `LATEST` and `EARLIEST` are hints: the latest snapshot is found by probing forward from the hint, the
   earliest by probing forward from its hint (expiration deletes from the front).
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
        """The hint's id, or None when it is missing or damaged (a hint only saves probing: nothing depends on it)."""
        try:
            return int(self.io.read_bytes(self.paths.hint_file(name)).decode().strip())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # e.g. a directory in its place, bytes that are not a number
            log.warning("table %s: ignoring the damaged hint %s: %s", self.table_name, self.paths.hint_file(name), e)
            return None

    def _listed_ids(self) -> list[int]:
        ids = (snapshot_id_of(s.path.rsplit("/", 1)[-1]) for s in self.io.list_dir(self.paths.snapshot_dir))
        return sorted(i for i in ids if i is not None)

    def exists(self, snapshot_id: int) -> bool:
        return self.io.exists(self.paths.snapshot_file(snapshot_id))

    def latest_id(self) -> int | None:
        hint = self._hint(LATEST)
        if hint is None or not self.exists(hint):
            ids = self._listed_ids()
            if not ids:
                return None
            hint = ids[-1]
        while self.exists(hint + 1):
            hint += 1
        return hint

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
        sid = self.latest_id()
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
        """Best effort: the snapshot is published already, and a stale or damaged hint is only probed past."""
        try:
            self.io.replace_hint(self.paths.hint_file(name), str(snapshot_id).encode())
        except OSError as e:
            log.warning("table %s: could not update the hint %s: %s", self.table_name, self.paths.hint_file(name), e)

    def set_earliest_hint(self, snapshot_id: int) -> None:
        self._set_hint(EARLIEST, snapshot_id)

    def delete(self, snapshot_id: int) -> None:
        self.io.delete(self.paths.snapshot_file(snapshot_id))
