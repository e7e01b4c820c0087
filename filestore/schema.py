"""Table schemas, versioned as JSON files `schema/schema-<id>` inside the table directory (on-disk format).

A table exists exactly when `schema-0` exists: creating it is an exclusive create, so two concurrent
CREATE TABLEs cannot both win. Its identity is the `uuid` stamped into `schema-0` when it is created (on-disk field
"uuid"; schemas written before it have none): a table dropped and created again under the same name is another
table, and a handle of the first one must not write into the second (`FileStore.check_identity`). The Arrow schema is kept exactly (IPC bytes, base64) next to a readable list of fields.

Every column has an id (on disk: each field's "id", and "highestFieldId", the highest id ever given): a renamed
column keeps its id, a dropped one's id is never given again (a column added under a dropped column's name is
another column, and never reads the dropped one's data: filestore.evolution maps a file's columns by id). Schemas
written before renames and drops existed stored each field's position as its "id" and no "highestFieldId": columns
were only ever appended then, so positions are their ids.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Mapping

import pyarrow as pa

from filestore.errors import CorruptFileError, FileStoreError
from filestore.fileio import FileIO
from filestore.paths import TablePaths, schema_id_of
from filestore.merge_keys import COUNT, KIND, SEQ

SYSTEM_COLUMNS = (SEQ, KIND, COUNT)


@dataclass(frozen=True)
class TableSchema:
    id: int
    arrow_schema: pa.Schema
    primary_keys: tuple[str, ...] = ()
    partition_keys: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    comment: str | None = None
    time_millis: int = 0
    uuid: str | None = None  # the table's identity (on disk: "uuid"), stamped by SchemaManager.create
    # the bucket key of a table without a primary key that gained columns: the columns it had before (on disk:
    # "bucketKeys", absent until then); its rows keep their buckets whatever columns are added
    bucket_keys: tuple[str, ...] = ()
    # each column's id, in the order of `arrow_schema` (on disk: each field's "id"); () means their positions
    field_ids: tuple[int, ...] = ()
    # the highest column id ever given in this table, dropped columns' included (on disk: "highestFieldId")
    highest_field_id: int = -1

    def __post_init__(self) -> None:
        ids = self.field_ids or tuple(range(len(self.arrow_schema)))
        if len(ids) != len(self.arrow_schema) or len(set(ids)) != len(ids) or any(i < 0 for i in ids):
            raise ValueError(f"column ids {list(ids)} do not fit the columns {self.arrow_schema.names}")
        object.__setattr__(self, "field_ids", tuple(int(i) for i in ids))
        object.__setattr__(self, "highest_field_id", max(self.highest_field_id, *ids, -1))

    def field_id(self, name: str) -> int:
        """The id of column `name` (KeyError when there is none)."""
        return dict(zip(self.arrow_schema.names, self.field_ids))[name]

    @property
    def names_by_id(self) -> dict[int, str]:
        return dict(zip(self.field_ids, self.arrow_schema.names))

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The merge key: the primary key, or the whole row for a table without one."""
        return self.primary_keys or tuple(self.arrow_schema.names)

    @property
    def bucket_key_columns(self) -> tuple[str, ...]:
        """The columns the bucket function hashes (filestore.bucket): the primary key, or for a table without one
        the whole row as the table was created (its columns before any was added: `bucket_keys`)."""
        return self.primary_keys or self.bucket_keys or tuple(self.arrow_schema.names)

    @property
    def has_primary_key(self) -> bool:
        return bool(self.primary_keys)

    def to_json(self) -> str:
        fields = [
            {"id": i, "name": f.name, "type": str(f.type), "nullable": f.nullable}
            for i, f in zip(self.field_ids, self.arrow_schema)
        ]
        return json.dumps(
            {
                "version": 1,
                "id": self.id,
                "fields": fields,
                "highestFieldId": self.highest_field_id,
                "primaryKeys": list(self.primary_keys),
                "partitionKeys": list(self.partition_keys),
                "options": dict(sorted(self.options.items())),
                "comment": self.comment,
                "timeMillis": self.time_millis,
                **({"uuid": self.uuid} if self.uuid else {}),
                **({"bucketKeys": list(self.bucket_keys)} if self.bucket_keys else {}),
                "arrowSchema": base64.b64encode(self.arrow_schema.serialize().to_pybytes()).decode(),
            },
            indent=2,
        )

    @staticmethod
    def from_json(text: str, path: str = "<schema>") -> "TableSchema":
        try:
            d = json.loads(text)
            arrow_schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(d["arrowSchema"])))
            listed = d.get("fields") or []
            ids = tuple(int(f["id"]) for f in listed) if all("id" in f for f in listed) else ()
            return TableSchema(
                id=int(d["id"]),
                arrow_schema=arrow_schema,
                primary_keys=tuple(d["primaryKeys"]),
                partition_keys=tuple(d["partitionKeys"]),
                options=dict(d["options"]),
                comment=d.get("comment"),
                time_millis=int(d.get("timeMillis", 0)),
                uuid=d.get("uuid"),
                bucket_keys=tuple(d.get("bucketKeys", ())),
                field_ids=ids if len(ids) == len(arrow_schema) else (),
                highest_field_id=int(d.get("highestFieldId", -1)),
            )
        except (KeyError, ValueError, TypeError, pa.ArrowInvalid) as e:
            raise CorruptFileError(path, f"not a table schema: {e}") from e


class SchemaManager:
    def __init__(self, io: FileIO, paths: TablePaths) -> None:
        self.io = io
        self.paths = paths

    def create(self, schema: TableSchema) -> bool:
        """Publish `schema` as `schema-<id>`, stamped with its time and (for a new table) a fresh identity;
        False when that id already exists."""
        stamped = dataclasses.replace(schema, time_millis=schema.time_millis or int(time.time() * 1000),
                                      uuid=schema.uuid or uuid.uuid4().hex)
        return self.io.create_exclusive(self.paths.schema_file(schema.id), stamped.to_json().encode())

    def schema_ids(self) -> list[int]:
        ids = [schema_id_of(s.path.rsplit("/", 1)[-1]) for s in self.io.list_dir(self.paths.schema_dir)]
        return sorted(i for i in ids if i is not None)

    def latest(self) -> TableSchema:
        ids = self.schema_ids()
        if not ids:
            raise FileStoreError(f"no schema under {self.paths.schema_dir}: not a table")
        return self.get(ids[-1])

    def get(self, schema_id: int) -> TableSchema:
        path = self.paths.schema_file(schema_id)
        try:
            text = self.io.read_bytes(path).decode()
        except (OSError, UnicodeDecodeError) as e:  # missing after listing, a directory in its place, not text
            raise CorruptFileError(path, f"unreadable table schema: {e}") from None
        return TableSchema.from_json(text, path)
