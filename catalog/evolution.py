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
3. `rename_column`: a column keeps its id and data under a new name, which must be new (not a column, not
   reserved); the name of a dropped column may be taken (it is another column: its id is new).
4. `drop_columns`: the columns leave the schema; their ids are never given again (`highest_field_id`), so a column
   added later under a dropped name reads null in rows written before, never the dropped data. At least one column
   remains.
5. Never renamed or dropped: primary-key and partition columns (the key codec, the bucket hash and the partition
   paths depend on them), the columns a table without a primary key hashes into buckets (`bucket_key_columns`), and
   columns its options name (`sequence.field`, `fields.<column>.*`: `referenced`). A table without a primary key
   drops no column at all: its whole row is its key.
6. Columns are identified by id (filestore.evolution); none is reordered.
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
    ids = current.field_ids + tuple(range(current.highest_field_id + 1, current.highest_field_id + 1 + len(added)))
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
                               bucket_keys=bucket_keys, field_ids=ids)


def _fixed(table: str, current: TableSchema, name: str, what: str, referenced: Mapping[str, str]) -> None:
    """SchemaEvolutionError when column `name` may not be renamed or dropped (module docstring, rule 5)."""
    if name not in current.arrow_schema.names:
        raise _error(table, name, None, None, f"cannot {what} column {name!r}: there is no such column (columns: "
                                              f"{current.arrow_schema.names})")
    type_ = current.arrow_schema.field(name).type
    reason = ("a primary-key column" if name in current.primary_keys else
              "a partition column" if name in current.partition_keys else
              "a bucket-key column (a table without a primary key hashes the columns it was created with)"
              if not current.has_primary_key and name in current.bucket_key_columns else
              f"named by option {referenced[name]!r}" if name in referenced else
              "a column of a table without a primary key, whose whole row is its key"
              if what == "drop" and not current.has_primary_key else None)
    if reason is not None:
        raise _error(table, name, type_, None, f"cannot {what} column {name!r}: it is {reason}")


def rename_column(table: str, current: TableSchema, old: str, new: str, reserved: Sequence[str],
                  referenced: Mapping[str, str]) -> TableSchema | None:
    """The schema after renaming column `old` to `new` (same id, same data), or None when `old` == `new`."""
    _fixed(table, current, old, "rename", referenced)
    if old == new:
        return None
    type_ = current.arrow_schema.field(old).type
    if not isinstance(new, str) or not new:
        raise _error(table, old, type_, None, f"cannot rename column {old!r} to {new!r}: not a column name")
    if new in current.arrow_schema.names or new in reserved:
        why = "the table has a column of that name" if new in current.arrow_schema.names else \
            f"the name is reserved ({list(reserved)})"
        raise _error(table, old, type_, None, f"cannot rename column {old!r} to {new!r}: {why}")
    fields = [f.with_name(new) if f.name == old else f for f in current.arrow_schema]
    return dataclasses.replace(current, id=current.id + 1, time_millis=0,
                               arrow_schema=pa.schema(fields, metadata=current.arrow_schema.metadata))


def drop_columns(table: str, current: TableSchema, names: Sequence[str],
                 referenced: Mapping[str, str]) -> TableSchema:
    """The schema without columns `names` (their ids retired: `highest_field_id` keeps them)."""
    if not names:
        raise _error(table, "", None, None, "drop_column needs at least one column")
    for name in names:
        if list(names).count(name) > 1:
            raise _error(table, name, None, None, f"column {name!r} is dropped twice")
        _fixed(table, current, name, "drop", referenced)
    kept = [(i, f) for i, f in zip(current.field_ids, current.arrow_schema) if f.name not in names]
    if not kept:
        raise _error(table, names[0], None, None, f"cannot drop columns {list(names)}: no column would remain")
    return dataclasses.replace(current, id=current.id + 1, time_millis=0, field_ids=tuple(i for i, _ in kept),
                               arrow_schema=pa.schema([f for _, f in kept], metadata=current.arrow_schema.metadata))
