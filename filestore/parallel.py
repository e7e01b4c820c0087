"""The file store's one worker pool: bucket flushes, split reads and bucket compactions run on it in parallel.

pyarrow releases the GIL in sorting, taking, Parquet encoding and decoding, so buckets use both cores of a small
machine. Tasks on the pool never wait for other pool tasks (no nesting), so the pool cannot deadlock.

The workers are daemon threads fed by a queue: they need no joining at interpreter exit, and work still running then
is abandoned like any unflushed memtable (nothing it wrote is committed). (An abort at exit once blamed on the
threads came from Parquet pre-buffering on Python file objects: see `filestore.datafile.read_data_file`.)
"""
from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future, wait
from typing import Any, Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class WorkerPool:
    def __init__(self, size: int) -> None:
        self.size = size
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()
        for i in range(size):
            threading.Thread(target=self._work, name=f"filestore-{i}", daemon=True).start()

    def _work(self) -> None:
        while True:
            future, fn, args = self._tasks.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as e:  # handed to whoever waits on the future
                future.set_exception(e)
            else:
                future.set_result(result)

    def submit(self, fn: Callable[..., R], *args: Any) -> "Future[R]":
        future: Future[R] = Future()
        self._tasks.put((future, fn, args))
        return future

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """`fn` of every item, in the items' order; waits for all, then raises the first failure."""
        futures = [self.submit(fn, item) for item in items]
        wait_all(futures)
        return [f.result() for f in futures]


_lock = threading.Lock()
_pool: WorkerPool | None = None


def _forget_pool_in_child() -> None:
    global _pool, _lock
    _pool, _lock = None, threading.Lock()  # a forked child (e.g. a Spark worker) has none of the parent's threads


os.register_at_fork(after_in_child=_forget_pool_in_child)


def pool_size() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def pool() -> WorkerPool:
    global _pool
    with _lock:
        if _pool is None:
            _pool = WorkerPool(pool_size())
        return _pool


def wait_all(futures: Sequence["Future[Any]"]) -> None:
    """Wait for every future, then raise the first failure (in submission order), if any."""
    wait(futures)
    for f in futures:
        if f.exception() is not None:
            f.result()
