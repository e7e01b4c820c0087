"""`tablestore service` on an S3 warehouse (SeaweedFS): compaction of a write-only table, snapshot expiry per the
service's overrides while a tag keeps its snapshot readable and a consumer keeps what it needs, orphan removal that spares the lease, the tag and the
consumer, partition expiry, and /metrics and the status page reading the same numbers the table gives."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from prometheus_client.exposition import generate_latest

import tablestore
from tablestore.service import Intervals, Service, ServiceConfig
from tablestore.service.metrics import registry_for
from tablestore.service.page import overview

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("v", pa.string())])
FAST = Intervals(compaction_s=0.05, expiry_s=0.05, orphan_s=0.05)


def test_the_service_keeps_an_s3_table_healthy(s3_warehouse: str, s3_server: object) -> None:
    options = s3_server.catalog_options()  # type: ignore[attr-defined]
    cat = tablestore.Catalog(s3_warehouse, options=options)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id", "dt"], partition_by=["dt"], options={
        "log.system": "none", "write-only": "true", "bucket": "1", "partition.expiration-time": "7 d",
        "partition.timestamp-formatter": "yyyy-MM-dd"})
    old = (dt.date.today() - dt.timedelta(days=30)).isoformat()
    today = dt.date.today().isoformat()
    for i in range(6):
        t.write(pa.table({"id": [i, i + 100], "dt": [old, today], "v": [f"a{i}", f"b{i}"]}, schema=SCHEMA))
    tag_snapshot = t.create_tag("before", snapshot=3).snapshot_id
    tagged = t.read(snapshot_id=3)
    t.reset_consumer("reader", snapshot=t.latest_snapshot_id())
    stray = f"{t.path}/bucket-0/data-left-by-a-crash.parquet"
    fs = s3_server.fs()  # type: ignore[attr-defined]
    fs.pipe(stray.removeprefix("s3://"), b"not a data file")
    service = Service(ServiceConfig(s3_warehouse, intervals=FAST, catalog_options=options,
                                    overrides={"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
                                               "orphan-files.older-than": "0 s"}))
    try:
        service.run_once()
        service.run_once()
    finally:
        service.stop()
    t = cat.get_table("db.t")
    kinds = [s.kind for s in t.snapshots()]
    assert "COMPACT" in kinds and "OVERWRITE" in kinds     # compacted, and the old partition dropped
    assert sorted(t.read().column("dt").to_pylist()) == [today] * 6
    retained = [s.id for s in t.snapshots()]
    assert tag_snapshot not in retained and min(retained) == 5   # the consumer at 6 needs 5 on, the tag only files
    assert t.read(tag="before").sort_by("id").equals(tagged.sort_by("id"))   # its snapshot expired, still read
    assert not fs.exists(stray.removeprefix("s3://"))
    assert [c.consumer_id for c in t.consumers()] == ["reader"]
    assert [tag.name for tag in t.tags()] == ["before"]
    metrics = generate_latest(registry_for(service)).decode()
    latest = t.latest_snapshot_id()
    assert f'tablestore_table_latest_snapshot_id{{table="db.t"}} {float(latest)}' in metrics
    status, _, body = overview(service)
    assert status == 200 and "db.t" in body.decode()
