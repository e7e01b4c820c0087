"""Table schemas, versioned as JSON files `schema/schema-<id>` inside the table directory (on-disk format).

A table exists exactly when `schema-0` exists: creating it is an exclusive create, so two concurrent
CREATE TABLEs cannot both win. Its identity is the `uuid` stamped into `schema-0` when it is created (on-disk field
"uuid"; schemas written before it have none): a table dropped and created again under the same name is another
table, and a handle of the first one must not write into the second (`FileStore.check_identity`). The Arrow schema is kept exactly (IPC bytes, base64) next to a readable list of fields.
"""
from __future__ import annotations

import base64
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
            for i, f in enumerate(self.arrow_schema)
        ]
        return json.dumps(
            {
                "version": 1,
                "id": self.id,
                "fields": fields,
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
        stamped = TableSchema(
            id=schema.id,
            arrow_schema=schema.arrow_schema,
            primary_keys=schema.primary_keys,
            partition_keys=schema.partition_keys,
            options=schema.options,
            comment=schema.comment,
            time_millis=schema.time_millis or int(time.time() * 1000),
            uuid=schema.uuid or uuid.uuid4().hex,
            bucket_keys=schema.bucket_keys,
        )
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
