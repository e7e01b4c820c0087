"""What `tablestore ingest` reports while it runs: its progress record, and the figures it reads from the Spark
query's progress (Kafka lag, the offsets each micro-batch read up to)."""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery


@dataclass
class IngestProgress:
    """What the job reports while it runs (and its summary at the end)."""

    table: str
    batches: int = 0
    events: int = 0
    """Records read, but the bad ones skipped (those of other source tables included: they give no rows)."""
    rows: int = 0
    """Changes written (row images: an update may give two, a canal record one per row, a DDL event none)."""
    events_per_s: float = 0.0
    lag: int | None = None
    snapshots: int = 0
    last_commit_s: float | None = None
    event_to_commit_s: float | None = None
    bad_records: int = 0
    schema_changes: list[str] = field(default_factory=list)
    truncates: int = 0
    elapsed_s: float = 0.0
    state: str = "resolve"
    source_table: str | None = None
    """The source table whose records the table takes (None: every record's)."""

    def line(self) -> str:
        lag = "?" if self.lag is None else f"{self.lag:,}"
        commit = "-" if self.last_commit_s is None else f"{self.last_commit_s:.2f} s"
        fresh = "" if self.event_to_commit_s is None else f", newest event {self.event_to_commit_s:.1f} s old"
        bad = f"  skipped {plural(self.bad_records, 'bad record')}" if self.bad_records else ""
        truncated = f"  truncates applied {self.truncates}" if self.truncates else ""
        source = "" if self.source_table is None else f" (source table {self.source_table})"
        return (f"{self.table}{source}: {self.events:,} events ({self.events_per_s:,.0f}/s), "
                f"{plural(self.rows, 'change')}  lag {lag}  snapshots {self.snapshots}  last commit "
                f"{commit}{fresh}{bad}{truncated}")

    def summary(self) -> str:
        """What the run did, in one line: e.g. `ingested 1 event into shop.orders as 1 change in 2.1 s: 1 snapshot;
        skipped 2 bad records`."""
        bad = f"; skipped {plural(self.bad_records, 'bad record')}" if self.bad_records else ""
        return (f"ingested {plural(self.events, 'event')} into {self.table} as {plural(self.rows, 'change')} in "
                f"{self.elapsed_s:.1f} s: {plural(self.snapshots, 'snapshot')}{bad}")


@dataclass
class DatabaseIngestProgress:
    """What the job reports while it runs (and its summary at the end)."""

    database: str
    batches: int = 0
    events: int = 0
    rows: int = 0
    bad_records: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    """Per table: the events written into it."""
    created: list[str] = field(default_factory=list)
    schema_changes: list[str] = field(default_factory=list)
    truncates: int = 0
    last_batch_s: float | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    """The driver's time in each phase of the micro-batches so far (find: the tables and samples; tables: loading
    or creating them; plan: the decoders; write: the job writing every table's files; commit: the tables'
    commits)."""
    elapsed_s: float = 0.0
    state: str = "resolve"

    def line(self) -> str:
        bad = f"  bad records skipped {self.bad_records:,}" if self.bad_records else ""
        last = "-" if self.last_batch_s is None else f"{self.last_batch_s:.2f} s"
        return (f"{self.database}: {self.events:,} events into {len(self.tables)} tables  micro-batches "
                f"{self.batches}  last {last}{bad}")


def plural(n: int, noun: str) -> str:
    """`1 event`, `2 events`, `1,000 events`."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _offsets(value: Any) -> Any:
    """A source's offsets in a query's progress: a dict, or (PySpark's progress objects) its JSON text; PySpark 4.1
    sometimes gives the dict's Python text instead (seen once a query restarted in one session), read as such; None
    when neither."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return None


def lag(progress: Mapping[str, Any]) -> int | None:
    """Kafka records behind: the source's latest offsets minus what the micro-batch read up to."""
    total = 0
    for source in progress.get("sources") or []:
        latest, end = _offsets(source.get("latestOffset")), _offsets(source.get("endOffset"))
        if not isinstance(latest, dict) or not isinstance(end, dict):
            return None
        for topic, partitions in latest.items():
            for p, offset in partitions.items():
                total += max(0, int(offset) - int(end.get(topic, {}).get(p, offset)))
    return total


def end_offsets(progress: Mapping[str, Any]) -> dict[int, int]:
    """The Kafka offsets a micro-batch read up to, per partition (its source's `endOffset`)."""
    out: dict[int, int] = {}
    for source in progress.get("sources") or []:
        end = _offsets(source.get("endOffset"))
        for partitions in (end or {}).values():
            out.update({int(p): int(o) for p, o in partitions.items()})
    return out


def status(query: "StreamingQuery") -> dict[str, Any]:
    return dict(query.status or {})


def last_progress(query: "StreamingQuery") -> dict[str, Any]:
    return dict(query.lastProgress or {})


def event_latencies(commits: list[tuple[dict[int, int], int]], events: list[tuple[int, int, float]]) -> list[float]:
    """`commits`: per micro-batch in order, the Kafka offsets it read up to (per partition) and when it was
    committed (epoch ms); `events`: (partition, offset, made at in epoch seconds). The seconds from each event's
    making to the commit that holds it (events no commit holds yet are left out)."""
    out = []
    for partition, offset, made in events:
        for ends, commit_ms in commits:
            if offset < ends.get(partition, -1):
                out.append(commit_ms / 1000 - made)
                break
    return out


def batch_commits(query: "StreamingQuery") -> list[tuple[dict[int, int], int]]:
    """`event_latencies`' commits of any Kafka-sourced query from its progress: each micro-batch that read records,
    committed at its start plus its trigger's duration."""
    import datetime as dt

    out = []
    for p in query.recentProgress or []:
        if not p.get("numInputRows"):
            continue
        start = dt.datetime.fromisoformat(str(p["timestamp"]).replace("Z", "+00:00")).timestamp() * 1000
        out.append((end_offsets(p), int(start + int(p["durationMs"].get("triggerExecution", 0)))))
    return out
