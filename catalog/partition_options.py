"""The partition-expiry options of a table checked against its partition columns (`partition.timestamp-pattern`,
`partition.timestamp-formatter`: declared in catalog.options, applied by filestore.partition_expire), at
`create_table` and at every ALTER of its options: each problem is one InvalidOptionError naming the table and the
option."""
from __future__ import annotations

from typing import Sequence

from catalog.errors import InvalidOptionError
from catalog.options import (PARTITION_EXPIRATION_TIME, PARTITION_TIMESTAMP_FORMATTER, PARTITION_TIMESTAMP_PATTERN,
                             validate_table_options)
from catalog.table_options import TableOptions
from filestore import PartitionExpiry, pattern_references, strptime_format


def check_partition_expire_options(table: str, partition_keys: Sequence[str], options: TableOptions) -> None:
    """InvalidOptionError unless the timestamp pattern names only partition columns and the formatter translates."""
    pattern = options.get_optional(PARTITION_TIMESTAMP_PATTERN)
    if pattern is not None:
        try:
            pattern_references(pattern, partition_keys)
        except ValueError as e:
            raise InvalidOptionError(f"table {table!r}: option {PARTITION_TIMESTAMP_PATTERN.key!r}: {e}") from None
    formatter = options.get_optional(PARTITION_TIMESTAMP_FORMATTER)
    if formatter is not None:
        try:
            strptime_format(formatter)
        except ValueError as e:
            raise InvalidOptionError(f"table {table!r}: option {PARTITION_TIMESTAMP_FORMATTER.key!r}: {e}") from None



def partition_expiry_of(table: str, partition_keys: Sequence[str], options: TableOptions, *,
                        expiration_time: str | None = None, timestamp_pattern: str | None = None,
                        timestamp_formatter: str | None = None) -> PartitionExpiry:
    """The table's partition-expiry options, with those given here (a procedure's arguments; None: the table's
    own) overriding them for one call, checked as at CREATE; InvalidOptionError naming the table and option."""
    given = {PARTITION_EXPIRATION_TIME.key: expiration_time, PARTITION_TIMESTAMP_PATTERN.key: timestamp_pattern,
             PARTITION_TIMESTAMP_FORMATTER.key: timestamp_formatter}
    overrides = {k: v for k, v in given.items() if v is not None}
    try:
        validate_table_options(overrides)
        checked = TableOptions({**options.raw, **overrides})
        check_partition_expire_options(table, partition_keys, checked)
        return checked.partition_expiry()
    except InvalidOptionError as e:
        text = str(e)
        raise InvalidOptionError(text if text.startswith("table ") else f"table {table!r}: {text}") from None
