"""Turning what users hand the API into Arrow, and change kinds on the wire (+I/-U/+U/-D, owned by logstore)
into file-store value kinds: +I and +U add a row, -U and -D delete it. This is the only place that translation
happens."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filestore.meta import ValueKind
from logstore.changes import RowKind
from tablestore.errors import InvalidRowKindError, TableStoreError

_ADD_KINDS = (RowKind.INSERT.value, RowKind.UPDATE_AFTER.value)
_DELETE_KINDS = (RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value)

Data = Any
"""What `write` accepts: a pyarrow Table or RecordBatch, a pandas DataFrame, or a list of dicts."""


def to_arrow(data: Data) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, list):
        return pa.Table.from_pylist(data)
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TableStoreError(f"cannot write {type(data).__name__}: give a pyarrow Table/RecordBatch or a pandas DataFrame")


def value_kinds(table_name: str, row_kinds: pa.ChunkedArray) -> np.ndarray:
    """The ValueKind of each row of a `_row_kind` column, vectorised; unknown kinds raise naming them."""
    valid = pc.is_in(row_kinds, value_set=pa.array(_ADD_KINDS + _DELETE_KINDS))
    if row_kinds.null_count or not pc.all(valid, min_count=0).as_py():  # an empty changelog is valid
        bad = pc.unique(pc.filter(row_kinds, pc.invert(pc.fill_null(valid, False)))).to_pylist()
        if row_kinds.null_count:
            bad.append(None)
        raise InvalidRowKindError(bad if len(bad) > 1 else bad[0], table_name)
    deletes = pc.is_in(row_kinds, value_set=pa.array(_DELETE_KINDS)).to_numpy(zero_copy_only=False)
    return np.where(deletes, int(ValueKind.DELETE), int(ValueKind.ADD)).astype(np.int8)


