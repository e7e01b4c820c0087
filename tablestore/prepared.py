"""The changes of data files written elsewhere (Spark executor tasks), as the log records of their commit.

Executor tasks write data files only: a Kafka transaction cannot move from a task to the driver with the Python
client. The driver's write session (tablestore.writer.TableWriter.commit_prepared) produces the log records of a
commit from the files the commit adds, read back here: per (partition, bucket), the records of every added file in
sequence-number order (the order the file store applies them), ADD as `+I`, DELETE as `-D`; a record of a table
without a primary key with count n stands for |n| rows (+I when n > 0, -D when n < 0). So the log holds exactly what
the snapshot holds, after the writers' own merging (a key written twice in one task is one record). That is the log of
a table that deduplicates; one whose rows merge otherwise logs its merged changes (tablestore.log_publish.log_changes).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import logstore
from filestore import SYSTEM_COLUMNS, CommitMessage, DataFileMeta, StoreContext, ValueKind

SEQ, KIND, COUNT = SYSTEM_COLUMNS


def changes_of(store: StoreContext, messages: Sequence[CommitMessage]) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """Per (partition, bucket) the messages add files to: (changes with `_row_kind` + the table's columns, the
    bucket of each change)."""
    schema = store.schema.arrow_schema
    pk = store.schema.has_primary_key
    by_bucket: dict[tuple[tuple[str, ...], int], list[DataFileMeta]] = {}
    for m in messages:
        by_bucket.setdefault((m.partition, m.bucket), []).extend(m.added)
    columns = [SEQ, KIND] + ([] if pk else [COUNT]) + schema.names
    for (partition, bucket), files in sorted(by_bucket.items()):
        if not files:
            continue
        # each file read under the store's schema, whichever it was written under (filestore.evolution)
        records = pa.concat_tables(
            [store.read_file(partition, bucket, f, columns) for f in files], promote_options="default")
        records = records.take(pc.sort_indices(records, [(SEQ, "ascending")]))
        adds = records.column(KIND).to_numpy() == int(ValueKind.ADD)
        if pk:
            counts = np.ones(records.num_rows, dtype=np.int64)
        else:
            signed = records.column(COUNT).to_numpy()
            adds = np.where(adds, signed > 0, signed < 0)
            counts = np.abs(signed)
            records = records.take(pa.array(np.repeat(np.arange(records.num_rows), counts)))
            adds = np.repeat(adds, counts)
        if not records.num_rows:
            continue
        kinds = pa.array(np.where(adds, logstore.RowKind.INSERT.value, logstore.RowKind.DELETE.value), pa.string())
        changes = records.select(schema.names).cast(schema).add_column(0, logstore.ROW_KIND_COLUMN, kinds)
        yield changes, np.full(changes.num_rows, bucket, dtype=np.int32)
