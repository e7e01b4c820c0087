"""A real S3 server for the tests: SeaweedFS (Apache-2.0), built from its Go module and cached, started once per test
session (tests/conftest.py's `s3_server` fixture), like the Kafka broker.

    python tests/s3_server.py build    # build (or find) the cached `weed` binary; scripts/dev.py test runs it first
    python tests/s3_server.py run      # serve S3 on 127.0.0.1 until Ctrl-C (a scratch directory), for trying things

`go install` refuses the module (its go.mod has replace directives), so the build downloads the module with
`go mod download`, copies its tree somewhere writable and runs `go build ./weed` there: about 6-9 minutes on 2 cores,
once per cache (`$TABLESTORE_CACHE_DIR` or `~/.cache/tablestore`, under `seaweedfs/`). `weed mini` runs master,
volume server, filer and S3 gateway in one process; with no identities configured it accepts any access key, and it
enforces conditional writes (a second `If-None-Match: *` put of one key answers 412), which snapshot publishing needs.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

MODULE = "github.com/seaweedfs/seaweedfs"
VERSION = "v0.0.0-20261109003541-7506e5f91cd6"
BUCKET = "tablestore-test"
ACCESS_KEY = "tablestore"
SECRET_KEY = "tablestore-secret"
"""Any key works (no identities configured); the tests still pass these, as a user of a real store would."""


class S3ServerUnavailable(RuntimeError):
    """No Go toolchain to build SeaweedFS with, or the build or the server failed (the message says which)."""


def cache_dir() -> Path:
    base = os.environ.get("TABLESTORE_CACHE_DIR") or os.path.join(Path.home(), ".cache", "tablestore")
    return Path(base) / "seaweedfs"


def binary() -> Path:
    return cache_dir() / f"weed-{VERSION}"


def build(log: bool = True) -> Path:
    """The cached `weed` binary of VERSION, built first if absent (one build at a time: a file lock)."""
    target = binary()
    if target.exists():
        return target
    go = shutil.which("go")
    if go is None:
        raise S3ServerUnavailable("building SeaweedFS needs the Go toolchain (`go` on the PATH)")
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "build.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        env = {**os.environ, "GOPATH": str(root / "gopath"), "GOFLAGS": "-modcacherw"}
        if log:
            print(f"building SeaweedFS {VERSION} into {target} (6-9 minutes on 2 cores, once)", flush=True)
        began = time.monotonic()
        out = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{VERSION}"], env=env, cwd=root,
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise S3ServerUnavailable(f"go mod download {MODULE}@{VERSION} failed: {out.stderr or out.stdout}")
        tree = root / "src"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(json.loads(out.stdout)["Dir"], tree)
        for path in [tree, *tree.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        partial = root / f".weed-{os.getpid()}.partial"
        done = subprocess.run([go, "build", "-o", str(partial), "./weed"], env=env, cwd=tree,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise S3ServerUnavailable(f"go build ./weed failed: {done.stderr[-4000:]}")
        partial.replace(target)
        shutil.rmtree(tree, ignore_errors=True)
        if log:
            print(f"built SeaweedFS in {time.monotonic() - began:.0f} s", flush=True)
    return target


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str
    pid: int

    def catalog_options(self) -> dict[str, str]:
        """The catalog options (catalog.fs_options) that reach this server."""
        return {"s3.endpoint": self.endpoint, "s3.access-key": self.access_key, "s3.secret-key": self.secret_key,
                "s3.path.style.access": "true", "s3.region": "us-east-1"}

    def fs(self):  # type: ignore[no-untyped-def]
        """An s3fs file system on this server (no listing cache), for tests that look at the objects."""
        import s3fs
        return s3fs.S3FileSystem(endpoint_url=self.endpoint, key=self.access_key, secret=self.secret_key,
                                 use_listings_cache=False, skip_instance_cache=True,
                                 client_kwargs={"region_name": "us-east-1"},
                                 config_kwargs={"s3": {"addressing_style": "path"}})


def _free_ports(n: int) -> list[int]:
    """`n` free ports whose +10000 twins (SeaweedFS's gRPC ports) are free as well, none of them another's twin:
    `weed mini` reserves every port's twin and refuses a port given for another service that falls on one
    ("is reserved for gRPC calculation": a CI run of 2026-11-28 met it)."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535 or port in ports or port - 10000 in ports or port + 10000 in ports:
            continue
        with socket.socket() as twin:
            try:
                twin.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


def _answers(endpoint: str) -> bool:
    try:
        urllib.request.urlopen(endpoint, timeout=2).close()
        return True
    except urllib.error.HTTPError:
        return True   # an S3 error document (e.g. 403 for an anonymous ListBuckets): the gateway is up
    except OSError:
        return False


def start(data_dir: Path, timeout_s: float = 120) -> S3Server:
    """Start `weed mini` on free ports with its data in `data_dir`; return once the bucket exists."""
    weed = build()
    master, volume, filer, s3, admin, debug = _free_ports(6)
    data_dir.mkdir(parents=True, exist_ok=True)
    # every port its own (free, with a free gRPC twin at +10000), the extras it would open on fixed ports off
    cmd = [str(weed), "mini", f"-dir={data_dir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}", f"-s3.port={s3}",
           f"-admin.port={admin}", "-admin.port.legacy=0", "-admin.ui=false", f"-debug.port={debug}",
           "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-master.telemetry=false"]
    with open(data_dir / "weed.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _procs[proc.pid] = proc
    endpoint = f"http://127.0.0.1:{s3}"
    server = S3Server(endpoint, BUCKET, ACCESS_KEY, SECRET_KEY, proc.pid)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise S3ServerUnavailable(f"weed mini exited with {proc.returncode}: {_tail(data_dir / 'weed.log')}")
        if _answers(endpoint):
            try:
                server.fs().mkdir(BUCKET)
                return server
            except Exception as exc:  # the gateway answers before the filer behind it is ready
                if time.monotonic() > deadline:
                    stop(server)
                    raise S3ServerUnavailable(f"creating bucket {BUCKET} failed: {exc}") from exc
        if time.monotonic() > deadline:
            stop(server)
            raise S3ServerUnavailable(f"weed mini not ready after {timeout_s} s: {_tail(data_dir / 'weed.log')}")
        time.sleep(0.5)


_procs: dict[int, subprocess.Popen[bytes]] = {}


def stop(server: S3Server) -> None:
    proc = _procs.pop(server.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=3)   # its data is a scratch directory: nothing to flush
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            proc.wait()


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:]
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def running() -> Iterator[S3Server]:
    with tempfile.TemporaryDirectory(prefix="tablestore-s3-") as tmp:
        server = start(Path(tmp))
        try:
            yield server
        finally:
            stop(server)


if __name__ == "__main__":
    if sys.argv[1:] == ["build"]:
        print(build())
    elif sys.argv[1:] == ["path"]:
        print(binary())
    elif sys.argv[1:] == ["run"]:
        with running() as s:
            print(json.dumps(s.catalog_options()), flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
    else:
        sys.exit("usage: python tests/s3_server.py build|path|run")
