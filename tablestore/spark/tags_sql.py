"""`CALL managed.sys.create_tag(table => 'db.t', tag => 'x' [, snapshot => 5])` and
`CALL managed.sys.delete_tag(table => 'db.t', tag => 'x')` (also under `managed.system.`), Paimon's procedures: thin
calls to `Table.create_tag` / `Table.delete_tag` (tablestore.tags, filestore.tags). `$tags` is a system table of
tablestore.system_tables; `VERSION AS OF 'x'` is resolved by tablestore.spark.sql_tables.load_table."""
from __future__ import annotations

from typing import Any, Mapping

from filestore import TagError
from tablestore.table import Table

CREATE_TAG_SCHEMA = ("`tag_name` STRING, `snapshot_id` BIGINT, `schema_id` BIGINT, `commit_time` TIMESTAMP, "
                     "`record_count` BIGINT, `create_time` TIMESTAMP")
"""The new tag, as its `$tags` row."""
DELETE_TAG_SCHEMA = "`tag_name` STRING, `deleted` BOOLEAN"


def _tag(table: Table, args: Mapping[str, Any]) -> str:
    tag = args.get("tag")
    if not isinstance(tag, str):
        raise TagError(table.name, str(tag), "is not a tag name: give tag => 'name'")
    return tag


def create_tag(table: Table, args: Mapping[str, Any]) -> dict[str, Any]:
    """The action's result ({"schema", "rows"}, tablestore.spark.sql_actions) of tagging `table`'s snapshot
    `args["snapshot"]` (default: the latest) as `args["tag"]`."""
    snapshot = args.get("snapshot")
    t = table.create_tag(_tag(table, args), None if snapshot is None else int(snapshot))
    return {"schema": CREATE_TAG_SCHEMA, "rows": [[t.name, t.snapshot_id, t.schema_id, t.commit_time_millis,
                                                   t.record_count, t.create_time_millis]]}


def delete_tag(table: Table, args: Mapping[str, Any]) -> dict[str, Any]:
    """The action's result of deleting `table`'s tag `args["tag"]` (TagNotFoundError when there is none)."""
    name = _tag(table, args)
    table.delete_tag(name)
    return {"schema": DELETE_TAG_SCHEMA, "rows": [[name, True]]}
