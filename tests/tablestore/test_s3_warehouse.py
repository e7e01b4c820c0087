"""A warehouse on a real S3 server (SeaweedFS, tests/s3_server.py): the catalog's S3 options, snapshots published
by conditional writes, a store that ignores them refused, concurrent writer processes losing nothing."""
from __future__ import annotations

import http.client
import json
import http.server
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import tablestore
from catalog import InvalidOptionError
from filestore import ConditionalWriteUnsupportedError, FileIO, S3Settings
from s3_server import S3Server

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("n", pa.int64())])


def _catalog(warehouse: str, server: S3Server) -> tablestore.Catalog:
    return tablestore.Catalog(warehouse, options=server.catalog_options())


def test_a_table_on_s3_is_created_written_compacted_read_and_dropped(s3_warehouse: str, s3_server: S3Server) -> None:
    cat = _catalog(s3_warehouse, s3_server)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"], "n": [1, 1, 1]}, schema=SCHEMA))
    t.write(pa.table({"id": [2, 4], "v": ["B", "d"], "n": [2, 2]}, schema=SCHEMA))
    t.delete(pc.field("id") == 1)

    again = _catalog(s3_warehouse, s3_server)   # another catalog (a fresh process would be the same)
    assert again.list_databases() == ["db"] and again.list_tables("db") == ["t"]
    got = again.get_table("db.t").read().sort_by("id").to_pylist()
    assert [(r["id"], r["v"]) for r in got] == [(2, "B"), (3, "c"), (4, "d")]
    first = again.get_table("db.t").snapshots()[0].id
    assert again.get_table("db.t").read(snapshot_id=first).num_rows == 3   # time travel

    again.get_table("db.t").compact(full=True)
    assert again.get_table("db.t").read().sort_by("id").to_pylist() == got

    fs = s3_server.fs()
    prefix = s3_warehouse.removeprefix("s3://")
    assert any("/snapshot/snapshot-" in p for p in fs.find(prefix))
    again.drop_table("db.t")
    assert not again.table_exists("db.t")
    assert not [p for p in fs.find(prefix) if "/db.db/t/" in p]   # DROP TABLE really removed the objects


def test_exclusive_create_on_s3_has_exactly_one_winner(s3_warehouse: str, s3_server: S3Server) -> None:
    io, root = FileIO.from_url(s3_warehouse, S3Settings(
        endpoint=s3_server.endpoint, access_key=s3_server.access_key, secret_key=s3_server.secret_key,
        region="us-east-1", path_style_access=True))
    assert io.object_store
    path = f"{root}/snapshot/snapshot-7"
    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda i: io.create_exclusive(path, f"writer {i}".encode()), range(8)))
    assert won.count(True) == 1
    assert io.read_bytes(path) == f"writer {won.index(True)}".encode()   # the winner's bytes, whole
    assert io.create_exclusive(path, b"late") is False


def test_credentials_and_endpoint_from_the_aws_environment(
    s3_warehouse: str, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    cat = tablestore.Catalog(s3_warehouse)   # no catalog options: the environment says where and who
    cat.create_database("db")
    cat.create_table("db.t", SCHEMA, primary_key=["id"]).write(
        pa.table({"id": [1], "v": ["x"], "n": [1]}, schema=SCHEMA))
    assert _catalog(s3_warehouse, s3_server).get_table("db.t").read().num_rows == 1


def test_unknown_catalog_option_is_refused_naming_it(s3_warehouse: str, s3_server: S3Server) -> None:
    with pytest.raises(InvalidOptionError, match="s3.endpoint-url"):
        tablestore.Catalog(s3_warehouse, options={**s3_server.catalog_options(), "s3.endpoint-url": "x"})
    with pytest.raises(InvalidOptionError, match="s3.path.style.access"):
        tablestore.Catalog(s3_warehouse, options={**s3_server.catalog_options(), "s3.path.style.access": "maybe"})


class _DroppingProxy(http.server.ThreadingHTTPServer):
    """An HTTP proxy in front of the S3 server that drops `If-None-Match`: a store that ignores conditional writes."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://")
        super().__init__(("127.0.0.1", 0), _Forward)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("if-none-match", "connection")}
        conn = http.client.HTTPConnection(self.server.upstream, timeout=30)  # type: ignore[attr-defined]
        conn.request(self.command, self.path, body=body or None, headers=headers)
        reply = conn.getresponse()
        data = reply.read()
        self.send_response(reply.status)
        for k, v in reply.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def ignoring_store(s3_server: S3Server) -> Iterator[str]:
    proxy = _DroppingProxy(s3_server.endpoint)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy.endpoint
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_a_store_that_ignores_conditional_writes_is_refused_at_catalog_load(
    s3_warehouse: str, s3_server: S3Server, ignoring_store: str
) -> None:
    options = {**s3_server.catalog_options(), "s3.endpoint": ignoring_store}
    with pytest.raises(ConditionalWriteUnsupportedError) as refused:
        tablestore.Catalog(s3_warehouse, options=options)
    assert ignoring_store in str(refused.value) and s3_server.bucket in str(refused.value)
    assert "If-None-Match" in str(refused.value)
    _catalog(s3_warehouse, s3_server).list_databases()   # the real store, behind it, is fine


COMMITS = 12


def _writer(warehouse: str, options: dict[str, str], writer: int) -> int:
    t = tablestore.Catalog(warehouse, options=options).get_table("db.t")
    for n in range(COMMITS):
        ids = [writer * 1000 + n * 10 + i for i in range(4)] + [0]   # its own keys and one key every writer updates
        t.write(pa.table({"id": ids, "v": [f"w{writer}"] * 5, "n": [n] * 5}, schema=SCHEMA))
    return writer


def test_concurrent_writer_processes_on_s3_lose_nothing(s3_warehouse: str, s3_server: S3Server) -> None:
    writers = 3
    cat = _catalog(s3_warehouse, s3_server)
    cat.create_database("db")
    cat.create_table("db.t", SCHEMA, primary_key=["id"],
                     options={"bucket": "2", "num-sorted-run.compaction-trigger": "3", "commit.max-retries": "50"})
    options = s3_server.catalog_options()
    with ProcessPoolExecutor(writers, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = sorted(pool.map(_writer, [s3_warehouse] * writers, [options] * writers, range(1, writers + 1)))
    assert done == list(range(1, writers + 1))
    got = cat.get_table("db.t").read()
    assert got.num_rows == writers * COMMITS * 4 + 1
    mine = sorted((r["v"], r["n"]) for r in got.to_pylist() if r["id"] != 0)
    assert mine == sorted((f"w{w}", n) for w in range(1, writers + 1) for n in range(COMMITS) for _ in range(4))
    appends = [s for s in cat.get_table("db.t").snapshots() if s.kind == "APPEND"]
    assert len(appends) == writers * COMMITS   # every commit landed once: none overwrote another's snapshot


def test_the_cli_reaches_an_s3_warehouse_with_option_flags_or_the_environment(
    s3_warehouse: str, s3_server: S3Server, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tablestore import cli

    cat = _catalog(s3_warehouse, s3_server)
    cat.create_database("db")
    cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"write-only": "true"})
    for n in range(3):
        cat.get_table("db.t").write(pa.table({"id": [n], "v": ["x"], "n": [n]}, schema=SCHEMA))
    flags = [f"--option={k}={v}" for k, v in s3_server.catalog_options().items()]

    assert cli.main(["--warehouse", s3_warehouse, *flags, "--output", "json", "describe", "db.t"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "db.t"
    assert cli.main(["compact", "db.t", "--full", "--warehouse", s3_warehouse, *flags]) == 0   # options after it
    capsys.readouterr()
    assert [s.kind for s in cat.get_table("db.t").snapshots()][-1] == "COMPACT"

    monkeypatch.setenv("TABLESTORE_CATALOG_OPTIONS", json.dumps(s3_server.catalog_options()))
    assert cli.main(["--warehouse", s3_warehouse, "--output", "json", "describe", "db.t"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "db.t"

    assert cli.main(["--warehouse", s3_warehouse, "--option", "bucket=2", "describe", "db.t"]) == 1
    assert "not a catalog option" in capsys.readouterr().err


def test_rename_table_on_s3_copies_then_removes(s3_warehouse: str, s3_server: S3Server) -> None:
    """An object store has no rename: the objects are copied (the schema last) then removed (the schema first)."""
    from rename_case import rename_case

    cat = _catalog(s3_warehouse, s3_server)
    cat.create_database("db")
    rename_case(cat)
    prefix = s3_warehouse.removeprefix("s3://")
    assert not [p for p in s3_server.fs().find(prefix) if "/db.db/old/" in p or "/db.db/new/" in p]
