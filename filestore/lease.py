"""The table's service lease: which `tablestore service` runs a table's duties (compaction, expiry, orphan removal),
taken and renewed with nothing but the exclusive create the snapshots are published with (filestore.fileio: a hard
link on a local disk, `If-None-Match: *` on S3), so it needs no lock service and no conditional overwrite.

    <table>/service/lease-<epoch>     JSON {"owner": ..., "expires_ms": ..., "written_ms": ...} (on-disk format)

The lease is the file of the highest epoch. Protocol (every step is one exclusive create of the next epoch):
1. acquire (`acquire_lease`): no lease file, or the current one expired (its `expires_ms` is past by the reader's
   clock) or released, or written by this owner: create `lease-<epoch + 1>`. Of two services racing, the store
   accepts one create; the other holds nothing.
2. renew (`renew_lease`, by the holder, well before `expires_ms`): create `lease-<epoch + 1>` with a later expiry.
   Refused means a taker found the lease expired and won it: the holder has lost the table and stops its duties.
3. release (`release_lease`, a clean stop): create `lease-<epoch + 1>` with `expires_ms` = 0, so another service
   takes over at once instead of after the timeout.
4. after each create, the files of the epochs before the previous one are deleted (two stay: a reader listing
   while the newest is created still finds a lease).
Writers read the lease too: a `write-only` table whose lease is live has a service compacting it, so a writer that
finds a bucket above `num-sorted-run.stop-trigger` waits for that compaction (tablestore.writer).

The lease only decides who does the work; it guards no data: a compaction that overlaps a lost lease is validated
at its commit like any other (filestore.commit). Clocks of the services should agree within a fraction of the
timeout. Orphan removal never deletes these files (filestore.expire).
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from filestore.fileio import FileIO
from filestore.paths import LEASE_PREFIX, TablePaths, lease_epoch_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lease:
    """One lease file: its epoch, the owner (a service's id) and when it expires (epoch ms; 0: released)."""

    epoch: int
    owner: str
    expires_ms: int
    written_ms: int

    def live(self, now_ms: int | None = None) -> bool:
        """Whether a service holds it (not expired and not released) by this machine's clock."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return self.expires_ms > now_ms


def current_lease(io: FileIO, paths: TablePaths) -> Lease | None:
    """The lease of the table (the file of the highest epoch), None when no service ever held it."""
    epochs = sorted((e for s in io.list_dir(paths.service_dir)
                     if (e := lease_epoch_of(s.path.rsplit("/", 1)[-1])) is not None), reverse=True)
    for epoch in epochs:
        try:
            return _read(io, paths, epoch)
        except FileNotFoundError:   # deleted since the listing (rule 4): an older one was being cleaned up
            continue
    return None


def _read(io: FileIO, paths: TablePaths, epoch: int) -> Lease:
    data = json.loads(io.read_bytes(paths.lease_file(epoch)).decode())
    return Lease(epoch, str(data["owner"]), int(data["expires_ms"]), int(data.get("written_ms", 0)))


def _write_next(io: FileIO, paths: TablePaths, after: int, owner: str, expires_ms: int) -> Lease | None:
    """Exclusively create the lease of epoch `after + 1`; the new lease, or None when another got that epoch."""
    now_ms = int(time.time() * 1000)
    lease = Lease(after + 1, owner, expires_ms, now_ms)
    body = json.dumps({"owner": owner, "expires_ms": expires_ms, "written_ms": now_ms}).encode()
    if not io.create_exclusive(paths.lease_file(lease.epoch), body):
        return None
    for old in range(max(1, after - 3), after):   # rule 4; older ones were deleted by earlier steps
        io.delete(paths.lease_file(old))
    return lease


def acquire_lease(io: FileIO, paths: TablePaths, owner: str, timeout_ms: int) -> Lease | None:
    """Take the table's lease for `owner` for `timeout_ms` (rule 1); the lease taken, None when another service
    holds it (or won the race for it)."""
    now_ms = int(time.time() * 1000)
    found = current_lease(io, paths)
    if found is not None and found.live(now_ms) and found.owner != owner:
        return None
    taken = _write_next(io, paths, found.epoch if found else 0, owner, now_ms + timeout_ms)
    if taken is not None:
        log.info("table %s: service %s took the lease (epoch %s%s)", paths.root, owner, taken.epoch,
                 "" if found is None or found.owner == owner else f", after {found.owner}'s expired")
    return taken


def renew_lease(io: FileIO, paths: TablePaths, held: Lease, timeout_ms: int) -> Lease | None:
    """Extend `held` (rule 2); the new lease, or None when it was lost to another service."""
    renewed = _write_next(io, paths, held.epoch, held.owner, int(time.time() * 1000) + timeout_ms)
    if renewed is None:
        log.warning("table %s: service %s lost the lease (epoch %s) to another service", paths.root, held.owner,
                    held.epoch + 1)
    return renewed


def release_lease(io: FileIO, paths: TablePaths, held: Lease) -> bool:
    """Give `held` up (rule 3) so another service takes the table at once; False when it was already lost."""
    return _write_next(io, paths, held.epoch, held.owner, 0) is not None


def service_active(io: FileIO, paths: TablePaths) -> bool:
    """Whether a service holds the table's lease now (writers of `write-only` tables wait for its compaction)."""
    found = current_lease(io, paths)
    return found is not None and found.live()
