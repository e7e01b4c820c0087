"""Partition values as the file store stores them (on-disk: manifests and directory names hold these strings).

A partition value is *rendered* to a string: Arrow's cast to string, a null as `__DEFAULT_PARTITION__`. So that no
value can take the null's name, a string value made of `__DEFAULT_PARTITION__` followed by zero or more `%` gets
one more `%` (the string "__DEFAULT_PARTITION__" renders as "__DEFAULT_PARTITION__%", whose directory is
`k=__DEFAULT_PARTITION__%25`). Rendering is then one-to-one and `partition_value` inverts it. Every other value
renders as before this rule existed, so tables written earlier read the same, except rows whose partition value
was the literal "__DEFAULT_PARTITION__": they were stored in the null partition, which pruning and overwrites still
take them for (docs/design.md).
Non-string partition types (integers, dates, booleans) never render as the null's name.

A rendered value becomes the directory name `<key>=<escaped value>` (filestore.paths): one such name must fit the
file-name limit of common file systems, 255 bytes; `check_partition_names` refuses longer ones before any IO.
"""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from filestore.errors import InvalidWriteError
from filestore.paths import DEFAULT_PARTITION, escape_partition_value

LITERAL_MARK = "%"
"""On-disk: appended to a string value that would otherwise render as DEFAULT_PARTITION (or as a marked one)."""
MAX_NAME_BYTES = 255
_LITERAL = f"^{DEFAULT_PARTITION}{LITERAL_MARK}*$"


def _is_text(type_: pa.DataType) -> bool:
    return bool(pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_string_view(type_))


def render_partition_column(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The rendered value of each row, vectorised (see the module docstring)."""
    rendered = pc.cast(column, pa.string())
    if _is_text(column.type):
        literal = pc.match_substring_regex(rendered, _LITERAL)
        rendered = pc.if_else(literal, pc.binary_join_element_wise(rendered, LITERAL_MARK, ""), rendered)
    return pc.fill_null(rendered, DEFAULT_PARTITION)


def partition_value(rendered: str, type_: pa.DataType) -> pa.Scalar:
    """The typed value a rendered partition value stands for (the inverse of `render_partition_column`)."""
    if rendered == DEFAULT_PARTITION:
        return pa.scalar(None, type_)
    if _is_text(type_) and rendered.startswith(DEFAULT_PARTITION) and rendered.endswith(LITERAL_MARK) and (
        set(rendered[len(DEFAULT_PARTITION):]) == {LITERAL_MARK}
    ):
        rendered = rendered[: -len(LITERAL_MARK)]
    return pa.scalar(rendered).cast(type_)


def check_partition_names(table_name: str, partition_keys: Sequence[str], data: pa.Table) -> None:
    """InvalidWriteError when a partition value of `data` would give a directory name over MAX_NAME_BYTES bytes
    (checked on the distinct values only, before anything is written)."""
    for key in partition_keys:
        if key not in data.column_names:
            continue
        column = data.column(key)
        if not _is_text(column.type):
            continue  # integers, dates and booleans render short
        longest = pc.max(pc.binary_length(column)).as_py()
        if longest is None or len(key) + 1 + 3 * longest <= MAX_NAME_BYTES:
            continue  # even if every byte were escaped as %XX it fits
        for value in render_partition_column(pc.unique(column)).to_pylist():
            name = f"{key}={escape_partition_value(value)}"
            size = len(name.encode())
            if size > MAX_NAME_BYTES:
                shown = value if len(value) <= 40 else value[:40] + "..."
                raise InvalidWriteError(
                    f"table {table_name!r}: partition value {shown!r} of column {key!r} makes the directory name "
                    f"{size} bytes long once escaped; the limit is {MAX_NAME_BYTES} bytes"
                )
