"""The file store's one worker pool: bucket flushes, split reads and bucket compactions run on it in parallel.

pyarrow releases the GIL in sorting, taking, Parquet encoding and decoding, so buckets use both cores of a small
machine. Tasks on the pool never wait for other pool tasks (no nesting), so the pool cannot deadlock.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Sequence

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _forget_pool_in_child() -> None:
    global _pool, _lock
    _pool, _lock = None, threading.Lock()  # a forked child (e.g. a Spark worker) has none of the parent's threads


os.register_at_fork(after_in_child=_forget_pool_in_child)


def pool_size() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=pool_size(), thread_name_prefix="filestore")
        return _pool


def wait_all(futures: Sequence["Future[Any]"]) -> None:
    """Wait for every future, then raise the first failure (in submission order), if any."""
    wait(futures)
    for f in futures:
        if f.exception() is not None:
            f.result()
