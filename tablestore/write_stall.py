"""A `write-only` table's write stall: the writer never compacts, so a writer that outruns the service's compaction
(`tablestore service`) waits after its commit until every bucket it wrote is back at `num-sorted-run.stop-trigger`
sorted runs, instead of piling up runs that every read must merge.

It waits only while a service holds the table's lease (filestore.lease): without one, nobody would compact, and the
write goes on as it always did (the runs pile up until `tablestore compact` or a service runs). A service that dies
while a writer waits lets its lease expire, and the writer goes on then.
"""
from __future__ import annotations

import logging
import time
from typing import Collection

from filestore import FileStore, LiveFiles, Partition, service_active, sorted_run_counts

log = logging.getLogger(__name__)

POLL_S = 0.2


def wait_for_service(name: str, store: FileStore, written: Collection[tuple[Partition, int]],
                     live: LiveFiles | None = None) -> float:
    """Wait until the buckets `written` are at most at the stop trigger, while a service holds the lease; the
    seconds waited. `live`: the live files of the commit just made (so a write below the stop trigger reads
    nothing). Logs (WARNING, the writer's progress) when it starts and ends waiting."""
    stop_trigger = store.options.stop_trigger
    began, announced = time.monotonic(), False
    while True:
        if live is None:
            live = store.live_files(store.snapshots.latest())
        counts = sorted_run_counts(live, written)
        live = None   # from now on, the latest snapshot's
        over = {where: n for where, n in counts.items() if n > stop_trigger}
        if not over:
            break
        if not service_active(store.io, store.paths):
            if announced:
                log.warning("table %s: the service's lease expired while this write waited for its compaction; "
                            "writing on", name)
            break
        if not announced:
            log.warning("table %s: %s bucket(s) at up to %s sorted runs, above num-sorted-run.stop-trigger=%s: "
                        "waiting for the service's compaction (tablestore service holds the table)", name, len(over),
                        max(over.values()), stop_trigger)
            announced = True
        time.sleep(POLL_S)
    waited = time.monotonic() - began
    if announced:
        log.warning("table %s: the service compacted it back to the stop trigger after %.1f s; writing on", name,
                    waited)
    return waited
