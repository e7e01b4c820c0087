"""The scope of an overwriting `Table.write`, from the caller's `overwrite=` argument."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from filestore import InvalidWriteError, render_partition_column
from tablestore.errors import TableStoreError


def overwrite_scope(name: str, schema: pa.Schema, partition_by: Sequence[str], overwrite: object,
                    table: pa.Table) -> Any:
    """What a `Table.write(..., overwrite=)` replaces: None (nothing: an append), "all", "dynamic" (the partitions
    written) or a partition spec {column: rendered value}, checked against the table's partition columns and the
    rows written (every row must be in the overwritten partition)."""
    if overwrite is False or overwrite is None:
        return None
    if overwrite is True:
        return "all"
    if overwrite == "dynamic":
        return "dynamic" if partition_by else "all"
    if not isinstance(overwrite, Mapping):
        raise TableStoreError(f"table {name!r}: overwrite must be a bool, a partition mapping or 'dynamic'")
    unknown = [k for k in overwrite if k not in partition_by]
    if unknown:
        raise TableStoreError(
            f"table {name!r}: overwrite names {unknown}, which are not partition columns {partition_by}"
        )
    spec: dict[str, str] = {}
    for key, value in overwrite.items():
        type_ = schema.field(key).type
        try:
            typed = pa.scalar(value).cast(type_) if value is not None else pa.scalar(None, type_)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise TableStoreError(
                f"table {name!r}: overwrite value {value!r} does not fit partition column {key!r} "
                f"of type {type_}: {e}"
            ) from None
        spec[key] = render_partition_column(pa.array([typed.as_py()], type_))[0].as_py()
        if key in table.schema.names and table.num_rows:
            rendered = render_partition_column(table.column(key).cast(type_))
            outside = pc.sum(pc.not_equal(rendered, spec[key])).as_py()
            if outside:
                raise InvalidWriteError(
                    f"table {name!r}: {outside} rows are outside the overwritten partition "
                    f"{key}={spec[key]!r}"
                )
    return spec or "all"
