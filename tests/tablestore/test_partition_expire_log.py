"""Partition expiry on a table with a Kafka log: the drop is a file-store OVERWRITE only; the log gets no `-D` per
row (as Paimon drops partitions without a changelog), and a `full` scan after it starts without the partition."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from log_helpers import changes, drop_created_tables, kafka_catalog

pytestmark = pytest.mark.kafka

SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                    ("v", pa.int64())])


@pytest.fixture(autouse=True)
def _drop_tables() -> Iterator[None]:
    yield
    drop_created_tables()


def test_expiry_publishes_nothing_to_the_log(tmp_path: Path, kafka_bootstrap: str) -> None:
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    t = cat.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
                         options={"bucket": "2", "partition.expiration-time": "1 d"})
    t.write(pa.table({"dt": ["2024-01-01", "2024-01-01", "2999-01-01"], "id": [1, 2, 3], "v": [1, 2, 3]},
                     schema=SCHEMA))
    offsets = t.snapshots()[-1].log_offsets

    assert t.expire_partitions() == [{"dt": "2024-01-01"}]

    dropped = t.snapshots()[-1]
    assert dropped.kind == "OVERWRITE" and dropped.log_offsets == offsets
    logged = changes(t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=1.0, normalize=False))
    assert sorted((kind, r["id"]) for kind, r in logged) == [("+I", 1), ("+I", 2), ("+I", 3)]   # no -D
    assert [(kind, r["id"]) for kind, r in changes(t.read_changes(scan="full", timeout_s=1.0))] == [("+I", 3)]
