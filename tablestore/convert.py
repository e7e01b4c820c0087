"""Turning what users hand the API into Arrow, and change kinds on the wire (+I/-U/+U/-D, owned by logstore)
into file-store value kinds: additions (+I, +U) add a row, retractions (-U, -D) delete it. This is the only place
that translation happens; which kind is an addition, the default +I and the validation are logstore's."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

import logstore
from filestore import ValueKind
from tablestore.errors import InvalidRowKindError, TableStoreError

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


def checked_row_kinds(table_name: str, data: pa.Table) -> pa.Array | pa.ChunkedArray:
    """The `_row_kind` column of `data` (all +I when absent), checked by logstore; InvalidRowKindError names the
    table, the column type or the bad values and their count."""
    try:
        return logstore.row_kinds_of(data, table=table_name)
    except logstore.InvalidRowKindError as e:
        raise InvalidRowKindError.of(e) from None


def value_kinds(row_kinds: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The file-store ValueKind of each (checked) row kind, vectorised."""
    return np.where(logstore.addition_mask(row_kinds), int(ValueKind.ADD), int(ValueKind.DELETE)).astype(np.int8)
