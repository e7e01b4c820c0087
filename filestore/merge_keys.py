"""The record columns every merge reads (on-disk names) and the one way to find where each key's records begin in
records sorted by key: shared by filestore.merge (deduplicate, counts) and filestore.merge_rules (the other merge
engines)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEQ = "_SEQUENCE_NUMBER"  # on-disk
KIND = "_VALUE_KIND"  # on-disk
COUNT = "_VALUE_COUNT"  # on-disk


def first_of_each_key(sorted_table: pa.Table, key_columns: Sequence[str]) -> np.ndarray:
    """A boolean per row of `sorted_table` (sorted by `key_columns`): whether it is the first row of its key."""
    n = sorted_table.num_rows
    first = np.zeros(n, dtype=bool)
    if n == 0:
        return first
    first[0] = True
    for name in key_columns:
        col = sorted_table.column(name)
        differs = pc.not_equal(col.slice(1), col.slice(0, n - 1))
        if pa.types.is_floating(col.type):  # NaN is one key, equal to itself (keys are normalized: filestore.coerce)
            differs = pc.and_(differs, pc.invert(pc.and_(pc.is_nan(col.slice(1)), pc.is_nan(col.slice(0, n - 1)))))
        # nulls only occur in whole-row keys: null vs null is the same key, null vs value a different one
        null_change = pc.not_equal(pc.is_null(col.slice(1)), pc.is_null(col.slice(0, n - 1)))
        first[1:] |= pc.or_kleene(pc.fill_null(differs, False), null_change).to_numpy(zero_copy_only=False)
    return first
