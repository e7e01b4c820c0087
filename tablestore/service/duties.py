"""The duties `tablestore service` runs for each table whose lease it holds, each on its own schedule:

- compaction (`write-only` = true tables only; their writers never compact): universal compaction every service
  interval, and a full compaction every `compaction.optimization-interval` when set;
- snapshot expiry (`snapshot.time-retained`, `snapshot.num-retained.min/max`) every expiry interval;
- orphan-file removal (`orphan-files.older-than`) every orphan interval;
- partition expiry (`partition.expiration-time`) every `partition.expiration-check-interval`;
- automatic tags (`tag.automatic-creation`, tablestore.service.autotag) every expiry interval.

The table's own options decide what each duty does, the service's `--option` overrides over them. A duty that fails
is logged and recorded (`TableDuties.errors`, the /metrics error counts), and runs again at its next turn; it never
stops the service. A compaction that loses a race with a writer's commit is no error: it runs again next turn.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping

import catalog as _catalog
from filestore import CommitConflictError, CommitRetriesExhaustedError, FileStore, Lease
from tablestore.service.autotag import auto_tag_duty
from tablestore.table import Table

if TYPE_CHECKING:
    from tablestore.service.spark_compact import SparkCompactor

log = logging.getLogger(__name__)

DUTIES = ("compaction", "full-compaction", "snapshot-expiry", "orphan-removal", "partition-expiry", "auto-tag")
"""The duties, as /metrics labels them (on-the-wire names: do not change)."""

RECENT_ERRORS = 50
"""How many recent duty errors the service keeps (per service, newest last)."""


@dataclass(frozen=True)
class DutyError:
    """A duty that failed: when, which table and duty, and the error's one-line message."""

    time_ms: int
    table: str
    duty: str
    error: str


@dataclass(frozen=True)
class Intervals:
    """How often each duty runs, in seconds (the service's settings; per-table options may add their own)."""

    compaction_s: float = 10.0
    expiry_s: float = 60.0
    orphan_s: float = 3600.0


@dataclass
class TableDuties:
    """One table's schedule and results, kept by the service while it holds the table's lease."""

    name: str
    lease: Lease
    next_run: dict[str, float] = field(default_factory=dict)
    """duty -> monotonic time it is due next (absent: due now)."""
    runs: dict[str, int] = field(default_factory=lambda: {d: 0 for d in DUTIES})
    errors: dict[str, int] = field(default_factory=lambda: {d: 0 for d in DUTIES})
    last_compaction_s: float | None = None
    last_compaction_snapshot: int | None = None

    def due(self, duty: str, now: float) -> bool:
        return self.next_run.get(duty, 0.0) <= now


def open_table(catalog: _catalog.Catalog, name: str, overrides: Mapping[str, str]) -> tuple[Table, bool]:
    """Table `name` with the service's `overrides` over its own options (for the duties only: nothing is written
    to the table's schema), and whether it is `write-only`."""
    handle = catalog.get_table(name)
    if overrides:
        options = _catalog.TableOptions({**handle.options.raw, **overrides})
        try:
            store_options = options.to_filestore()
        except _catalog.InvalidOptionError as e:
            raise _catalog.InvalidOptionError(f"table {name!r}: the service's --option: {e}") from None
        store = FileStore(handle.store.io, handle.path, handle.schema, store_options, handle.identifier)
        handle = dataclasses.replace(handle, options=options, store=store)
    return Table(handle, catalog=catalog), handle.store.options.write_only


def _duration_s(table: Table, key: str, default_s: float | None) -> float | None:
    text = table.options.get(key)
    return default_s if text is None else _catalog.parse_duration(text) / 1000


def run_due(table: Table, write_only: bool, state: TableDuties, intervals: Intervals,
            record: Callable[[DutyError], None], spark: "SparkCompactor | None" = None) -> None:
    """Run every duty of `table` (opened by `open_table`) that is due; `spark`: big tables compact there."""
    full_every = _duration_s(table, _catalog.COMPACTION_OPTIMIZATION_INTERVAL.key, None)
    partition_ttl = table.options.get("partition.expiration-time")
    schedule: list[tuple[str, float | None, Callable[[], None]]] = [
        ("full-compaction", full_every if write_only else None,
         lambda: _compact(table, state, spark, full=True)),
        ("compaction", intervals.compaction_s if write_only else None,
         lambda: _compact(table, state, spark, full=False)),
        ("auto-tag", intervals.expiry_s if table.options.get("tag.automatic-creation", "none") != "none" else None,
         lambda: auto_tag_duty(table)),   # before expiry: the tag keeps its snapshot
        ("snapshot-expiry", intervals.expiry_s, lambda: _expire(table)),
        ("orphan-removal", intervals.orphan_s, lambda: _remove_orphans(table)),
        ("partition-expiry", _duration_s(table, "partition.expiration-check-interval", 3600.0)
         if partition_ttl else None, lambda: _expire_partitions(table)),
    ]
    for duty, every, run in schedule:
        now = time.monotonic()
        if every is None or not state.due(duty, now):
            continue
        if duty == "full-compaction" and duty not in state.next_run:
            state.next_run[duty] = now + every   # the first full compaction one interval after the service starts
            continue
        state.next_run[duty] = now + every
        try:
            run()
            state.runs[duty] += 1
        except (CommitConflictError, CommitRetriesExhaustedError) as e:
            log.info("table %s: %s lost a race with a writer, runs again next turn: %s", table.name, duty, e)
        except Exception as e:  # noqa: BLE001 - a duty's failure is recorded and retried, never the service's end
            state.errors[duty] += 1
            message = " ".join(str(e).split()) or type(e).__name__
            log.warning("table %s: %s failed: %s: %s", table.name, duty, type(e).__name__, message)
            record(DutyError(int(time.time() * 1000), table.name, duty, f"{type(e).__name__}: {message}"))


def _compact(table: Table, state: TableDuties, spark: "SparkCompactor | None", *, full: bool) -> None:
    began = time.monotonic()
    if spark is not None and spark.wants(sum(int(str(f["file_size"])) for f in table.files())):
        before = table.latest_snapshot_id()
        spark.compact(table.name, full=full)   # a Spark job on the cluster (tablestore.service.spark_compact)
        snapshot_id = table.latest_snapshot_id()
        snapshot_id = None if snapshot_id == before else snapshot_id
    else:
        snapshot_id = table.compact(full=full)
    if snapshot_id is not None:
        state.last_compaction_s = time.monotonic() - began
        state.last_compaction_snapshot = snapshot_id
        log.info("table %s: %s compaction in %.2f s, snapshot %s", table.name, "full" if full else "universal",
                 state.last_compaction_s, snapshot_id)


def _expire(table: Table) -> None:
    result = table.expire_snapshots()
    if result.expired_snapshots:
        log.info("table %s: expired snapshots %s..%s", table.name, result.expired_snapshots[0],
                 result.expired_snapshots[-1])


def _remove_orphans(table: Table) -> None:
    older_than_s = _duration_s(table, _catalog.ORPHAN_FILES_OLDER_THAN.key, None)
    if older_than_s is None:
        older_than_s = _catalog.parse_duration(str(_catalog.ORPHAN_FILES_OLDER_THAN.default)) / 1000
    table.remove_orphan_files(older_than=dt.timedelta(seconds=older_than_s))


def _expire_partitions(table: Table) -> None:
    table.expire_partitions()   # per the table's partition.* options, the service's overrides over them
