"""The published state of the Iceberg view (filestore.views.iceberg): where its metadata files are, which version
is the latest, and that version's metadata, entries and manifests, read once and then remembered per table (a
publish starts from the state the previous one left, without reading manifests back)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from filestore.views import iceberg_avro as ia

if TYPE_CHECKING:
    from filestore.context import StoreContext

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
VERSION_FILE = re.compile(r"^v(\d+)\.metadata\.json$")


@dataclass(frozen=True)
class Manifest:
    row: dict[str, Any]      # its manifest-list record
    keys: tuple[str, ...]    # the keys of the entries it lists


@dataclass(frozen=True)
class Published:
    """The state of the latest Iceberg snapshot (None: nothing published yet)."""

    version: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    data: dict[str, ia.Entry] = field(default_factory=dict)
    deletes: dict[str, ia.Entry] = field(default_factory=dict)
    manifests: tuple[Manifest, ...] = ()


cache: dict[tuple[str, str | None], Published] = {}
"""Per table (directory and identity), the state it last published or loaded: the next commit's publish starts from
it without reading manifests back (a few tables' worth per process)."""
CACHE_TABLES = 64


def root_uri(context: "StoreContext") -> str:
    return str(context.io.fs.unstrip_protocol(context.paths.root)).rstrip("/")


def io_path(context: "StoreContext", uri: str) -> str:
    base = root_uri(context)
    return context.paths.root + uri[len(base):] if uri.startswith(base) else uri


def metadata_file(context: "StoreContext", version: int) -> str:
    return f"{context.paths.root}/{METADATA_DIR}/v{version}.metadata.json"


def latest_version(context: "StoreContext") -> int | None:
    """The highest published version: the hint verified and probed past, else the listing's highest."""
    io = context.io
    found: int | None = None
    try:
        found = int(io.read_bytes(f"{context.paths.root}/{METADATA_DIR}/{VERSION_HINT}").decode().strip())
        if not io.exists(metadata_file(context, found)):
            found = None
    except (OSError, ValueError):
        found = None
    if found is None:
        names = (s.path.rsplit("/", 1)[-1] for s in io.list_dir(f"{context.paths.root}/{METADATA_DIR}"))
        found = max((v for v in map(version_of, names) if v is not None), default=None)
    while found is not None and io.exists(metadata_file(context, found + 1)):
        found += 1
    return found


def version_of(file_name: str) -> int | None:
    """N of `v<N>.metadata.json`, None for any other name."""
    m = VERSION_FILE.match(file_name)
    return int(m.group(1)) if m else None


def load(context: "StoreContext", version: int | None) -> Published:
    """The published state of `version`: its metadata, live entries and manifests (read once per process)."""
    if version is None:
        return Published()
    cached = cache.get((context.paths.root, context.schema.uuid))
    if cached is not None and cached.version == version:
        return cached
    metadata = json.loads(context.io.read_bytes(metadata_file(context, version)))
    current = metadata.get("current-snapshot-id")
    snapshot = next((s for s in metadata.get("snapshots", []) if s["snapshot-id"] == current), None)
    data: dict[str, ia.Entry] = {}
    deletes: dict[str, ia.Entry] = {}
    manifests: list[Manifest] = []
    if snapshot is not None:
        for row in ia.read_avro(context.io.read_bytes(io_path(context, snapshot["manifest-list"]))):
            keys = []
            for e in ia.read_avro(context.io.read_bytes(io_path(context, row["manifest_path"]))):
                if e["status"] == 2:
                    continue
                f = e["data_file"]
                entry = ia.Entry(f["file_path"], tuple(f["partition"].values()), f["record_count"],
                               f["file_size_in_bytes"], e["snapshot_id"], e["sequence_number"], f.get("first_row_id"),
                               f.get("referenced_data_file"), f.get("content_offset"), f.get("content_size_in_bytes"))
                if row["content"] == 0:
                    data[entry.path] = entry
                    keys.append(entry.path)
                else:
                    deletes[entry.referenced or entry.path] = entry
                    keys.append(entry.referenced or entry.path)
            manifests.append(Manifest(row, tuple(keys)))
    return remember(context, Published(version, metadata, data, deletes, tuple(manifests)))


def remember(context: "StoreContext", state: Published) -> Published:
    key = (context.paths.root, context.schema.uuid)
    cache.pop(key, None)
    while len(cache) >= CACHE_TABLES:
        cache.pop(next(iter(cache)))
    cache[key] = state
    return state
