"""Parsed manifests and manifest lists kept in memory by a long-lived process (the Spark catalog's services), so
that planning a query or a commit does not read and decode every manifest of the snapshot again.

Invariants:
1. A manifest file never changes once written: its name is unique to the writer that made it
   (`TablePaths.new_manifest_name`: the writer's uuid and a counter), in a directory unique to the table's path. A
   parse kept under the file's full path is therefore the file's content for as long as the file exists; a table
   dropped and created again under the same path writes manifests of other names.
2. Only a file read and parsed without error is kept: a missing or damaged manifest raises its `CorruptFileError`
   on every read, as without the cache.
3. The cache is bounded by the manifest entries it holds (a manifest list counts one per manifest it names); the
   least recently used files are dropped first.
4. Off unless a process enables it (`enable`): a library user's process reads the files each time, as before.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Sequence

DEFAULT_MAX_ENTRIES = 50_000
"""A parsed entry of a 4-column table takes about 1.5 KB (measured with tracemalloc; each column's statistics add to
it), so about 75 MB for such tables: the manifests of tables of tens of thousands of live files."""


class ManifestCache:
    """A bounded, least-recently-used map from a manifest's full path to its parsed records."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"a manifest cache holds at least one entry, not {max_entries}")
        self.max_entries = max_entries
        self._files: OrderedDict[str, tuple[Any, ...]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, path: str) -> list[Any] | None:
        """The records parsed from `path` (a new list: callers may change it), or None when not held."""
        with self._lock:
            records = self._files.get(path)
            if records is None:
                self.misses += 1
                return None
            self._files.move_to_end(path)
            self.hits += 1
            return list(records)

    def put(self, path: str, records: Sequence[Any]) -> None:
        weight = max(1, len(records))
        with self._lock:
            old = self._files.pop(path, None)
            if old is not None:
                self._weight -= max(1, len(old))
            if weight > self.max_entries:
                return   # larger than the whole cache: read each time
            self._files[path] = tuple(records)
            self._weight += weight
            while self._weight > self.max_entries:
                _, dropped = self._files.popitem(last=False)
                self._weight -= max(1, len(dropped))

    def __len__(self) -> int:
        return len(self._files)

    @property
    def entries(self) -> int:
        """The manifest entries held (the bound's unit)."""
        return self._weight


_process_cache: ManifestCache | None = None


def enable(max_entries: int = DEFAULT_MAX_ENTRIES) -> ManifestCache:
    """Keep the manifests this process reads from now on (a new, empty cache)."""
    global _process_cache
    _process_cache = ManifestCache(max_entries)
    return _process_cache


def disable() -> None:
    global _process_cache
    _process_cache = None


def current() -> ManifestCache | None:
    """The process's cache, or None when manifests are read each time (the default)."""
    return _process_cache
