"""The rules of schema evolution: which changes `Catalog.alter_table` publishes as the table's next schema.

A pure function of the current schema and the asked changes (no IO), so every rule is tested alone:
1. `add_columns`: each a nullable `pa.Field`, appended at the end in the given order (rows written before read it as
   null: filestore.evolution). Its name must be new (not a column, not reserved: RESERVED_COLUMNS); a column that
   exists with the same type and nullability is already added (a restarted ingest job re-applies its changes): no
   change; the same name with another type is refused.
2. `alter_column_types`: a column's type may only widen (filestore.widens: int8 -> int16 -> int32 -> int64,
   float32 -> float64, decimal(p, s) -> decimal(p', s) with p' > p); the same type is no change. Primary-key and
   partition columns never change type: the key codec (key bytes in manifests, the merge order) and the bucket hash
   depend on it. Nor do the columns of a table without a primary key that its bucket function hashes (the columns it
   was created with): the whole row is its key.
3. Columns are identified by name: none is renamed, dropped or reordered.
A refused change is a SchemaEvolutionError naming the table, the column and both types; nothing is published.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import pyarrow as pa

from catalog.errors import SchemaEvolutionError
from filestore import TableSchema, widens


def _error(table: str, column: str, old: pa.DataType | None, new: pa.DataType | None,
           message: str) -> SchemaEvolutionError:
    return SchemaEvolutionError(f"table {table!r}: {message}", table=table, column=column,
                                old_type=None if old is None else str(old), new_type=None if new is None else str(new))


def evolve_schema(table: str, current: TableSchema, add_columns: Sequence[pa.Field],
                  alter_column_types: Mapping[str, pa.DataType], reserved: Sequence[str]) -> TableSchema | None:
    """The schema after the changes (id `current.id + 1`), or None when they change nothing."""
    fields = list(current.arrow_schema)
    by_name = {f.name: i for i, f in enumerate(fields)}
    added: list[str] = []
    for new in add_columns:
        if not isinstance(new, pa.Field):
            raise _error(table, str(new), None, None, f"add_columns takes pyarrow fields, not {new!r}")
        if new.name in by_name:
            old = fields[by_name[new.name]]
            if new.name in added:
                raise _error(table, new.name, old.type, new.type, f"column {new.name!r} is added twice")
            if old.type.equals(new.type) and old.nullable == new.nullable:
                continue  # added before (e.g. by the same ingest job before a restart): nothing to do
            raise _error(table, new.name, old.type, new.type,
                         f"cannot add column {new.name!r} of type {new.type}: the table has a column {new.name!r} "
                         f"of type {old.type}{'' if old.nullable else ' not null'} (a column's name is its identity)")
        if new.name in reserved:
            raise _error(table, new.name, None, new.type,
                         f"cannot add column {new.name!r} of type {new.type}: the name is reserved ({list(reserved)})")
        if not new.nullable:
            raise _error(table, new.name, None, new.type,
                         f"cannot add column {new.name!r} of type {new.type} not null: an added column must be "
                         f"nullable (rows written before it read it as null)")
        by_name[new.name] = len(fields)
        fields.append(new)
        added.append(new.name)
    keys = set(current.primary_keys) | set(current.partition_keys)
    if not current.has_primary_key:
        keys |= set(current.bucket_key_columns)
    for name, type_ in alter_column_types.items():
        if name not in by_name:
            raise _error(table, name, None, type_, f"cannot change column {name!r} to {type_}: there is no such "
                                                   f"column (columns: {[f.name for f in fields]})")
        old = fields[by_name[name]]
        if not isinstance(type_, pa.DataType):
            raise _error(table, name, old.type, None, f"the new type of column {name!r} must be a pyarrow type, "
                                                      f"not {type_!r}")
        if old.type.equals(type_):
            continue
        if name in keys:
            what = ("a primary-key" if name in current.primary_keys else "a partition" if name in
                    current.partition_keys else "a bucket-key (a table without a primary key hashes the columns it "
                                                "was created with)")
            raise _error(table, name, old.type, type_,
                         f"cannot change column {name!r} from {old.type} to {type_}: it is {what} column, whose "
                         f"type the key codec and the bucket hash depend on")
        if not widens(old.type, type_):
            raise _error(table, name, old.type, type_,
                         f"cannot change column {name!r} from {old.type} to {type_}: only widening is allowed "
                         f"(int8 -> int16 -> int32 -> int64, float32 -> float64, decimal(p, s) -> decimal(p', s) "
                         f"with p' > p)")
        fields[by_name[name]] = old.with_type(type_)
    schema = pa.schema(fields, metadata=current.arrow_schema.metadata)
    if schema.equals(current.arrow_schema, check_metadata=True):
        return None
    bucket_keys = current.bucket_keys
    if added and not current.has_primary_key and not bucket_keys:
        bucket_keys = tuple(current.arrow_schema.names)  # rows keep their buckets: the hash of the old columns
    return dataclasses.replace(current, id=current.id + 1, arrow_schema=schema, time_millis=0,
                               bucket_keys=bucket_keys)
