"""The demo `tablestore demo` runs: a managed table on the embedded defaults (local files, no Kafka, no Spark)."""
from __future__ import annotations

import os
import tempfile

import pyarrow as pa
import pyarrow.compute as pc

from tablestore.catalog import Catalog


def _show(title: str, table: pa.Table) -> None:
    print(f"\n== {title}")
    print(table.sort_by([(c, "ascending") for c in table.schema.names[:2]]).to_pandas().to_string(index=False))


def _tree(root: str) -> None:
    print(f"\n== files under {root}")
    for dirpath, _, files in sorted(os.walk(root)):
        rel = os.path.relpath(dirpath, root)
        for name in sorted(files):
            print(f"  {os.path.join(rel, name)}")


def run_demo(warehouse: str | None = None) -> None:
    warehouse = warehouse or tempfile.mkdtemp(prefix="tablestore-demo-")
    print(f"warehouse: {warehouse}")
    cat = Catalog(warehouse, options={"table-storage.bucket": "2"})
    cat.create_database("shop", ignore_if_exists=True)
    cat.drop_table("shop.orders", ignore_if_not_exists=True)
    schema = pa.schema([
        pa.field("dt", pa.string(), nullable=False),
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
    ])
    orders = cat.create_table("shop.orders", schema=schema, primary_key=["dt", "order_id"], partition_by=["dt"])
    print(f"created {orders!r} with {orders.options}")

    first = orders.write(pa.table({
        "dt": ["2024-01-01", "2024-01-01", "2024-01-02"],
        "order_id": [1, 2, 3],
        "customer": ["ada", "bob", "cy"],
        "amount": pa.array(["10.00", "25.50", "7.25"]).cast(pa.decimal128(10, 2)),
    }))
    _show(f"after snapshot {first}: three orders", orders.read())

    second = orders.write(pa.table({
        "dt": ["2024-01-01", "2024-01-01", "2024-01-02"],
        "order_id": [1, 2, 4],
        "customer": ["ada", "bob", "dee"],
        "amount": pa.array(["12.00", "25.50", "3.00"]).cast(pa.decimal128(10, 2)),
        "_row_kind": ["+U", "-D", "+I"],
    }))
    _show(f"after snapshot {second}: a changelog updated order 1, deleted order 2, inserted order 4", orders.read())
    _show("filter dt = '2024-01-02' (other partitions are pruned)", orders.read(filter=pc.field("dt") == "2024-01-02"))
    _show(f"time travel to snapshot {first}", orders.read(snapshot_id=first))

    compacted = orders.compact(full=True)
    print(f"\n== full compaction committed snapshot {compacted}")
    for s in orders.snapshots():
        print(f"  snapshot {s.id}: {s.kind:<9} records={s.total_record_count}")
    _tree(orders.path)
