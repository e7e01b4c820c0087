"""A source table's TRUNCATE applied by an ingest job (`ingest.truncate` = `apply`), at its place in the source's
order: what the table held before it is deleted, what the source wrote after it is kept.

Debezium sends a TRUNCATE (`op: t`, no key, on any partition of the table's topic) in the order of PostgreSQL's
write-ahead log; a micro-batch may hold changes from before and after it. The protocol, run by the job's driver:
1. the decoder ends the micro-batch at a TRUNCATE it has not passed (a `TRUNCATE` error naming topic, partition,
   offset and LSN: tablestore/spark/cdc_formats.py); nothing of the batch is committed;
2. the job empties the table in one snapshot (`Table.truncate`: a `-D` of every row, so the table's log carries
   them too);
3. it records the truncate's position, the *barrier*, in the table's directory (`checkpoint/truncate-<topic>.json`);
4. it starts the query again from its checkpoint: Spark replays the micro-batch, and the decoder gives no rows for
   the records at or before the barrier (by LSN where a record has one, PostgreSQL's; else by offset in the
   truncate's own partition), the truncate included: they were emptied by it.
A crash between 2 and 3 repeats 2 on the restart, on a table nothing was written to since: it deletes nothing. A
record at or before the barrier that arrives in a later micro-batch (another partition's, produced before the
truncate) is dropped as well: the truncate emptied it.
"""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from tablestore.spark.cdc_formats import TRUNCATE, TruncateBarrier

if TYPE_CHECKING:
    from catalog import CatalogTable

_POSITION = re.compile(rf"{TRUNCATE}: table .*? in topic (?P<topic>\S+) partition (?P<partition>\d+) "
                       r"offset (?P<offset>\d+): TRUNCATE(?: at LSN (?P<lsn>\d+))?")


def barrier_of(message: str) -> TruncateBarrier | None:
    """The TRUNCATE record's position in a decoder's TRUNCATE error (None: no such error in `message`)."""
    found = _POSITION.search(message)
    if found is None:
        return None
    lsn = found.group("lsn")
    return TruncateBarrier(found.group("topic"), int(found.group("partition")), int(found.group("offset")),
                           int(lsn) if lsn is not None else None)


def _path(handle: "CatalogTable", topic: str) -> str:
    return f"{handle.store.paths.checkpoint_dir}/truncate-{topic}.json"


def read_barrier(handle: "CatalogTable", topic: str) -> TruncateBarrier | None:
    """The last TRUNCATE of `topic` applied to the table, if any."""
    io = handle.store.io
    path = _path(handle, topic)
    if not io.exists(path):
        return None
    data = json.loads(io.read_bytes(path))
    return TruncateBarrier(data["topic"], int(data["partition"]), int(data["offset"]), data.get("lsn"))


def apply_truncate(handle: "CatalogTable", topic: str, barrier: TruncateBarrier) -> int:
    """Steps 2 and 3: empty the table (one snapshot, a `-D` per row in its log), then record the barrier. Returns
    the number of rows deleted."""
    from tablestore.table import Table

    deleted = Table(handle).truncate()
    io = handle.store.io
    io.mkdirs(handle.store.paths.checkpoint_dir)
    io.write_bytes(_path(handle, topic), json.dumps({"topic": barrier.topic, "partition": barrier.partition,
                                                     "offset": barrier.offset, "lsn": barrier.lsn}).encode())
    return deleted
