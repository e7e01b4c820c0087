"""`CALL managed.sys.expire_partitions(table => 'db.t' [, expiration_time => '1 d', timestamp_formatter => ...,
timestamp_pattern => ..., expire_strategy => 'values-time'])` (also under `managed.system.`), Paimon's procedure:
a thin call to `Table.expire_partitions` (tablestore.partition_expiry). The arguments override the table's
`partition.*` options for this call. One row per partition dropped, Hive style (`dt=2024-01-01/hour=5`)."""
from __future__ import annotations

from typing import Any, Mapping

import catalog
from tablestore.table import Table

EXPIRE_PARTITIONS_SCHEMA = "`expired_partitions` STRING"


def expire_partitions(table: Table, args: Mapping[str, Any]) -> dict[str, Any]:
    """The action's result ({"schema", "rows"}, tablestore.spark.sql_actions) of expiring `table`'s partitions."""
    strategy = args.get("expire_strategy")
    if strategy is not None and strategy != "values-time":
        raise catalog.InvalidOptionError(
            f"table {table.name!r}: expire_strategy {strategy!r} is not supported; the only strategy is "
            f"'values-time' (option 'partition.expiration-strategy')")
    expired = table.expire_partitions(expiration_time=args.get("expiration_time"),
                                      timestamp_pattern=args.get("timestamp_pattern"),
                                      timestamp_formatter=args.get("timestamp_formatter"))
    rows = [["/".join(f"{k}={'null' if v is None else v}" for k, v in p.items())] for p in expired]
    return {"schema": EXPIRE_PARTITIONS_SCHEMA, "rows": rows}
