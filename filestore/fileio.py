"""The one IO seam of the file store: every byte the file store reads or writes goes through `FileIO`.

Contract (what each call raises):
- `read_bytes` / `open_input`: `FileNotFoundError` when the path does not exist.
- `create_exclusive(path, data)`: atomically creates `path` with the whole of `data` or returns False when
  `path` already exists. A reader never sees a partial file at `path`. On a local disk the bytes go to a temp
  file which is hard-linked to `path` (link fails if it exists); on S3 a conditional put (`If-None-Match: *`,
  filestore.objectstore); elsewhere fsspec's exclusive mode ("xb").
- `write_bytes(path, data)`: for new, uniquely named files only (manifests, data files); may overwrite.
- `open_output(path)`: a context manager giving an Arrow output stream to a new, uniquely named file (data files,
  written as they are encoded); may overwrite. An exception in the block or in the close deletes the partial file;
  a crash while it is open leaves one, which the caller names in no commit (it names a file only once the block
  completed) and orphan removal deletes.
- `delete(path)`: missing files are ignored.

Tests inject faults by subclassing `FileIO` (see tests/filestore/faulty_io.py).
"""
from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Callable, Iterator

import fsspec
import pyarrow as pa
import pyarrow.fs as pafs
from fsspec.implementations.local import LocalFileSystem

from filestore.objectstore import S3_PROTOCOLS, S3Settings, is_s3, put_if_absent, s3_filesystem


@dataclass(frozen=True)
class FileStatus:
    path: str
    size: int
    mtime_ms: int
    is_dir: bool


class FileIO:
    """A file system rooted nowhere in particular: paths are the fsspec paths of `fs`."""

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        self.fs = fs
        self._local = isinstance(fs, LocalFileSystem)
        protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
        self.object_store = any(p in S3_PROTOCOLS for p in protocols)
        """S3: no directories to make, an exclusive create is a conditional put."""

    @staticmethod
    def from_url(url: str, s3: S3Settings | None = None) -> tuple["FileIO", str]:
        """The FileIO for a warehouse URL (a local path or any fsspec URL) and the path inside it; `s3` says how to
        reach an `s3://` (or `s3a://`) warehouse, the AWS environment and credential chain filling what it leaves."""
        if is_s3(url):
            fs = s3_filesystem(s3 or S3Settings())
            path = fs._strip_protocol(url)
        else:
            fs, path = fsspec.core.url_to_fs(url)
        if isinstance(fs, LocalFileSystem):
            path = os.path.abspath(path)
        return FileIO(fs), path.rstrip("/") or "/"

    # -- reading -------------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        data: bytes = self.fs.cat_file(path)
        return data

    def open_input(self, path: str) -> IO[bytes]:
        return self.fs.open(path, "rb")  # type: ignore[no-any-return]

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(path))

    def list_dir(self, path: str) -> list[FileStatus]:
        """Direct children of `path`; empty when it does not exist."""
        try:
            infos = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        return [self._status(i) for i in infos if i["name"].rstrip("/") != path.rstrip("/")]

    def walk_files(self, path: str) -> Iterator[FileStatus]:
        """Every file under `path`, recursively."""
        try:
            found = self.fs.find(path, detail=True)
        except FileNotFoundError:
            return
        for info in found.values():
            if info.get("type") != "directory":
                yield self._status(info)

    def _status(self, info: dict[str, object]) -> FileStatus:
        mtime = info.get("mtime") or info.get("created") or info.get("LastModified") or 0
        if hasattr(mtime, "timestamp"):
            mtime_ms = int(mtime.timestamp() * 1000)
        else:
            mtime_ms = int(float(mtime) * 1000)  # type: ignore[arg-type]
        return FileStatus(
            path=str(info["name"]).rstrip("/"),
            size=int(info.get("size") or 0),  # type: ignore[call-overload]
            mtime_ms=mtime_ms,
            is_dir=info.get("type") == "directory",
        )

    # -- writing -------------------------------------------------------------------------------
    def mkdirs(self, path: str) -> None:
        if not self.object_store:   # keys need no directories (and asking costs a request per file)
            self.fs.makedirs(path, exist_ok=True)

    def write_bytes(self, path: str, data: bytes | memoryview) -> None:
        self.mkdirs(self._parent(path))
        with self.fs.open(path, "wb") as f:
            f.write(data)

    @contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        self.mkdirs(self._parent(path))
        try:
            with self.arrow_fs().open_output_stream(path, compression=None) as f:
                yield f
        except BaseException:
            self.delete(path)   # an error, not a crash: leave no partial file behind
            raise

    def create_exclusive(self, path: str, data: bytes) -> bool:
        if self.object_store:
            return put_if_absent(self.fs, path, data)
        parent = self._parent(path)
        self.mkdirs(parent)
        if self._local:
            tmp = f"{parent}/.{os.path.basename(path)}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        try:
            with self.fs.open(path, "xb") as f:
                f.write(data)
            return True
        except FileExistsError:
            return False

    def replace_hint(self, path: str, data: bytes) -> None:
        """Overwrite a hint file (LATEST/EARLIEST): readers must treat it as a hint only."""
        if self._local:
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            self.write_bytes(tmp, data)
            try:
                os.replace(tmp, path)
            except OSError:  # e.g. a directory in the hint's place: leave no temp file behind
                os.unlink(tmp)
                raise
        else:
            self.write_bytes(path, data)

    def delete(self, path: str) -> None:
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass

    def delete_dir(self, path: str) -> None:
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def move_dir(self, src: str, dst: str, last: Callable[[str], bool]) -> None:
        """`src` renamed `dst` (which must not exist). A local file system renames the directory in one atomic step.
        An object store has no rename: every file is copied, those `last` names (the files that make a directory a
        table) after the others, then removed from `src`, those first; so neither name ever holds a partial table."""
        if self._local:
            self.fs.makedirs(self._parent(dst), exist_ok=True)
            os.rename(src, dst)   # atomic; refuses a non-empty dst
            return
        files = [f.path for f in self.walk_files(src)]
        for path in sorted(files, key=last):
            self.fs.copy(path, dst + path[len(src):])
        for path in sorted(files, key=lambda p: not last(p)):
            self.delete(path)
        self.delete_dir(src)

    def arrow_fs(self) -> pafs.FileSystem:
        """The same file system as a pyarrow FileSystem, for Parquet/ORC IO. Local files are opened memory-mapped: a
        read decodes straight from the page cache instead of copying each file into freshly allocated memory first
        (data files are never changed once written, so a mapping cannot see a file shrink)."""
        if self._local:
            return pafs.LocalFileSystem(use_mmap=True)
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    @staticmethod
    def _parent(path: str) -> str:
        return path.rsplit("/", 1)[0] if "/" in path else "."
