"""A fault-injecting `FileIO` for crash tests (the file store's one IO seam, filestore.fileio).

`FaultyFileIO` counts every mutating call (`write_bytes`, `open_output`, `create_exclusive`, `replace_hint`,
`delete`, `delete_dir`) and, when armed, "crashes" at the N-th one by raising `InjectedCrash`:

- mode "before": the call does nothing, as if the process died just before it;
- mode "after": the call completes, then the caller sees the crash (the process died right after the IO);
- mode "torn": half of the bytes reach the disk, then the crash (a torn write). For `open_output` (a data file
  streamed as it is encoded) the caller writes the whole stream, which is then cut to half its length, and the
  crash comes where the caller's block ends. For `create_exclusive` the half-written bytes land in a temp sibling,
  as the local implementation would leave them; the target is never created, because a reader must never see a
  partial file at the published path.

`before_call` lets a test run code just before a given call happens (e.g. another writer committing first).
Reads are never faulted: a crashed process reads nothing.
"""
from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal

import fsspec
import pyarrow as pa

from filestore.fileio import FileIO

Op = Literal["write_bytes", "open_output", "create_exclusive", "replace_hint", "delete", "delete_dir"]
Mode = Literal["before", "after", "torn"]
MUTATING: tuple[Op, ...] = ("write_bytes", "open_output", "create_exclusive", "replace_hint", "delete", "delete_dir")


class InjectedCrash(Exception):
    """The simulated crash. Deliberately not an OSError nor a FileStoreError: nothing may swallow it."""

    def __init__(self, op: str, path: str, index: int) -> None:
        super().__init__(f"injected crash at call #{index}: {op}({path})")
        self.op = op
        self.path = path
        self.index = index


@dataclass
class Call:
    op: str
    path: str


@dataclass
class FaultPlan:
    """Crash at the `crash_at`-th (0-based) counted call, in `mode`. None: never crash, just record."""

    crash_at: int | None = None
    mode: Mode = "before"
    ops: tuple[Op, ...] = MUTATING
    calls: list[Call] = field(default_factory=list)
    before_call: Callable[[Call], None] | None = None


class FaultyFileIO(FileIO):
    def __init__(self, fs: fsspec.AbstractFileSystem, plan: FaultPlan | None = None) -> None:
        super().__init__(fs)
        self.plan = plan if plan is not None else FaultPlan()

    @staticmethod
    def wrapping(io: FileIO, plan: FaultPlan | None = None) -> "FaultyFileIO":
        return FaultyFileIO(io.fs, plan)

    @property
    def calls(self) -> list[Call]:
        return self.plan.calls

    def _enter(self, op: Op, path: str) -> bool:
        """Record the call; True when this call is the one to crash at."""
        if op not in self.plan.ops:
            return False
        call = Call(op, path)
        if self.plan.before_call is not None:
            self.plan.before_call(call)
        index = len(self.plan.calls)
        self.plan.calls.append(call)
        return self.plan.crash_at == index

    def _crash(self, op: str, path: str) -> InjectedCrash:
        return InjectedCrash(op, path, len(self.plan.calls) - 1)

    def write_bytes(self, path: str, data: bytes | memoryview) -> None:
        if not self._enter("write_bytes", path):
            super().write_bytes(path, data)
            return
        if self.plan.mode == "after":
            super().write_bytes(path, data)
        elif self.plan.mode == "torn":
            super().write_bytes(path, data[: len(data) // 2])
        raise self._crash("write_bytes", path)

    @contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        if not self._enter("open_output", path):
            with super().open_output(path) as f:
                yield f
            return
        if self.plan.mode == "before":
            raise self._crash("open_output", path)
        with super().open_output(path) as f:
            yield f
            written = f.tell()
        if self.plan.mode == "torn":
            os.truncate(path, written // 2)  # the local file system: the crash tests' warehouses are local
        raise self._crash("open_output", path)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        if not self._enter("create_exclusive", path):
            return super().create_exclusive(path, data)
        if self.plan.mode == "after":
            super().create_exclusive(path, data)
        elif self.plan.mode == "torn":
            parent = path.rsplit("/", 1)[0]
            super().write_bytes(f"{parent}/.{os.path.basename(path)}.{uuid.uuid4().hex}.tmp", data[: len(data) // 2])
        raise self._crash("create_exclusive", path)

    def replace_hint(self, path: str, data: bytes) -> None:
        if not self._enter("replace_hint", path):
            super().replace_hint(path, data)
            return
        if self.plan.mode == "after":
            super().replace_hint(path, data)
        elif self.plan.mode == "torn":
            super().write_bytes(path, data[: len(data) // 2])  # a non-atomic overwrite of a hint
        raise self._crash("replace_hint", path)

    def delete(self, path: str) -> None:
        if not self._enter("delete", path):
            super().delete(path)
            return
        if self.plan.mode in ("after", "torn"):
            super().delete(path)
        raise self._crash("delete", path)

    def delete_dir(self, path: str) -> None:
        if not self._enter("delete_dir", path):
            super().delete_dir(path)
            return
        if self.plan.mode in ("after", "torn"):
            super().delete_dir(path)
        raise self._crash("delete_dir", path)
