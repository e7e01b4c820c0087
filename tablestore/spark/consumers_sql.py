"""`CALL managed.sys.reset_consumer(table => 'db.t', consumer_id => 'x' [, snapshot => 5])` (also under
`managed.system.`), Paimon's procedure: a thin call to `Table.reset_consumer` (tablestore.consumers,
filestore.consumers). With `snapshot` the consumer next reads the changes of that snapshot on; without, it is
deleted. `$consumers` is a system table of tablestore.system_tables."""
from __future__ import annotations

from typing import Any, Mapping

from filestore import ConsumerError
from tablestore.table import Table

RESET_CONSUMER_SCHEMA = "`consumer_id` STRING, `next_snapshot_id` BIGINT, `deleted` BOOLEAN"
"""The consumer afterwards: its next snapshot (null when deleted)."""


def reset_consumer(table: Table, args: Mapping[str, Any]) -> dict[str, Any]:
    """The action's result ({"schema", "rows"}, tablestore.spark.sql_actions) of resetting (or deleting) `table`'s
    consumer `args["consumer_id"]`."""
    consumer_id = args.get("consumer_id")
    if not isinstance(consumer_id, str):
        raise ConsumerError(table.name, str(consumer_id), "is not a consumer id: give consumer_id => 'id'")
    snapshot = args.get("snapshot")
    info = table.reset_consumer(consumer_id, None if snapshot is None else int(snapshot))
    return {"schema": RESET_CONSUMER_SCHEMA,
            "rows": [[consumer_id, None if info is None else info.next_snapshot_id, info is None]]}
