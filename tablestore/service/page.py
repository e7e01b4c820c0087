"""The service's status page, served at `/` and `/table/<db>.<table>` by its HTTP server (tablestore.service.server):
server-rendered HTML with inline SVG charts (tablestore.service.charts), no JavaScript.

- `/`: the service (owner, warehouse, uptime, errors) and one row per table it schedules: latest snapshot id and
  age, snapshots kept, live data files, the most sorted runs of a bucket, who holds its lease, the last compaction
  and (when this service ran it) its duration; and the service's recent errors.
- `/table/<db>.<table>`: the same figures, a timeline of the table's snapshots by kind (APPEND, COMPACT,
  OVERWRITE: `Table.snapshots()`), of its tags and of the service's duty events and errors; sorted runs per
  bucket over time (the service's samples, tablestore.service.history); the consumers and their lag, the tags, the
  recent snapshots, the service's recent duties and the table's recent errors.

A request reads each table's metadata once (its schema, its snapshots, its latest manifests, its lease; the table
page also its consumers and tags) and no data. Every string that comes from a table or an error (names, comments,
tags, consumer ids, messages) is escaped.
"""
from __future__ import annotations

import datetime as dt
import time
import urllib.parse
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Sequence

import catalog as _catalog
from filestore import Lease, Snapshot, TablePaths, current_lease, sorted_run_counts
from tablestore.consumers import infos as consumer_infos
from tablestore.service.charts import PALETTE, Mark, line_chart, timeline
from tablestore.tags import TagInfo
from tablestore.tags import infos as tag_infos

if TYPE_CHECKING:
    from tablestore.service.runner import Service

HTML = "text/html; charset=utf-8"
KIND_COLORS = {"APPEND": PALETTE[0], "COMPACT": PALETTE[2], "OVERWRITE": PALETTE[3]}
MAX_SERIES = 8
"""Sorted-run lines drawn one per bucket up to this many buckets; beyond it, the max and the mean of the buckets."""

_STYLE = """
body{font-family:system-ui,sans-serif;margin:20px;color:#222;max-width:1180px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:22px 0 6px}
table{border-collapse:collapse;font-size:13px;margin:4px 0}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#666;font-size:13px}.err{color:#b00}.ok{color:#070}
a{color:#1f5fa8}code{background:#f4f4f4;padding:0 3px}
"""


@dataclass(frozen=True)
class TableSummary:
    """One table's figures, read once per request."""

    name: str
    comment: str | None
    snapshots: list[Snapshot]
    data_files: int
    runs: dict[tuple[tuple[str, ...], int], int]
    lease: Lease | None
    stop_trigger: int

    @property
    def latest(self) -> Snapshot | None:
        return self.snapshots[-1] if self.snapshots else None

    @property
    def max_runs(self) -> int:
        return max(self.runs.values(), default=0)


def summarize(service: "Service", name: str) -> tuple[TableSummary, "_catalog.CatalogTable"]:
    handle = service.catalog.get_table(name)
    store = handle.store
    snapshots = list(store.snapshots.snapshots())
    live = store.live_files(snapshots[-1] if snapshots else None)
    files = sum(len(fs) for fs in live.files_by_bucket(None).values())
    held = service.held().get(name)
    lease = held.lease if held is not None else current_lease(store.io, TablePaths(handle.path))
    return TableSummary(name, handle.schema.comment, snapshots, files, sorted_run_counts(live), lease,
                        store.options.stop_trigger), handle


# -- formatting ----------------------------------------------------------------------------------------------------
def _utc(ms: int | float | None) -> str:
    if ms is None:
        return "—"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _age(ms: int | float | None, now_ms: float) -> str:
    if ms is None:
        return "—"
    s = max(0.0, (now_ms - ms) / 1000)
    if s < 120:
        return f"{s:.0f} s ago"
    if s < 7200:
        return f"{s / 60:.0f} min ago"
    if s < 172800:
        return f"{s / 3600:.1f} h ago"
    return f"{s / 86400:.1f} d ago"


def _link(name: str) -> str:
    return f'<a href="/table/{urllib.parse.quote(name)}">{escape(name)}</a>'


def _rows(header: Sequence[str], rows: Sequence[Sequence[str]], *, numeric: Sequence[int] = (),
          empty: str = "none", css_id: str = "") -> str:
    """A table whose cells are already HTML (escape the strings before)."""
    if not rows:
        return f'<p class="muted">{escape(empty)}</p>'
    ident = f' id="{css_id}"' if css_id else ""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    head = f"<thead><tr>{head}</tr></thead>" if any(header) else ""
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table{ident}>{head}<tbody>{body}</tbody></table>"


def _page(title: str, body: str) -> bytes:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{_STYLE}</style></head><body>{body}</body></html>").encode()


def _lease_text(service: "Service", lease: Lease | None, now_ms: int) -> str:
    if lease is None:
        return '<span class="muted">never held</span>'
    if lease.owner == service.owner and lease.live(now_ms):
        return '<span class="ok">this service</span>'
    if lease.live(now_ms):
        return f'{escape(lease.owner)} <span class="muted">(expires {_utc(lease.expires_ms)})</span>'
    return f'<span class="muted">free (last {escape(lease.owner)})</span>'


def _last_compaction(service: "Service", s: TableSummary, now_ms: int) -> tuple[str, str]:
    compacts = [x for x in s.snapshots if x.commit_kind.value == "COMPACT"]
    if not compacts:
        return "—", "—"
    last = compacts[-1]
    held = service.held().get(s.name)
    duration = "—"
    if held is not None and held.last_compaction_snapshot == last.id and held.last_compaction_s is not None:
        duration = f"{held.last_compaction_s:.2f} s"
    return f"#{last.id}, {_age(last.time_millis, now_ms)}", duration


def _errors(service: "Service", name: str | None, limit: int = 20) -> str:
    errors = [e for e in service.errors if name is None or e.table == name][-limit:][::-1]
    rows = [[_utc(e.time_ms), escape(e.table), escape(e.duty), f'<span class="err">{escape(e.error)}</span>']
            for e in errors]
    return _rows(["time", "table", "duty", "error"], rows, empty="no errors", css_id="errors")


# -- the pages -------------------------------------------------------------------------------------------------------
def overview(service: "Service") -> tuple[int, str, bytes]:
    now_ms = int(time.time() * 1000)
    rows = []
    for name in service.tables:
        try:
            s, _ = summarize(service, name)
        except Exception as e:  # noqa: BLE001 - e.g. dropped since the service's last turn: shown, not fatal
            rows.append([_link(name), f'<span class="err">{escape(" ".join(str(e).split()))}</span>',
                         *([""] * 7)])
            continue
        latest = s.latest
        compaction, duration = _last_compaction(service, s, now_ms)
        rows.append([
            _link(name) + (f'<div class="muted">{escape(s.comment)}</div>' if s.comment else ""),
            str(latest.id) if latest else "—",
            _age(latest.time_millis, now_ms) if latest else "—",
            str(len(s.snapshots)), str(s.data_files), str(s.max_runs),
            _lease_text(service, s.lease, now_ms), compaction, duration,
        ])
    body = [
        "<h1>tablestore service</h1>",
        f'<p class="muted">{escape(service.config.warehouse)} · service {escape(service.owner)} · up since '
        f"{_utc(service.started_at * 1000)} · {len(service.tables)} tables, {len(service.held())} held · "
        f'{service.error_count} errors · <a href="/metrics">/metrics</a></p>',
        "<h2>Tables</h2>",
        _rows(["table", "latest snapshot", "committed", "snapshots kept", "data files", "max sorted runs / bucket",
               "lease", "last compaction", "its duration"], rows, numeric=(1, 3, 4, 5), empty="no tables",
              css_id="tables"),
        "<h2>Recent errors</h2>",
        _errors(service, None),
    ]
    return 200, HTML, _page("tablestore service", "".join(body))


def _span(service: "Service", s: TableSummary, now_ms: int) -> tuple[float, float]:
    """The time axis both charts share: from the oldest snapshot or sample kept (at most a day back) to now."""
    samples = service.history.samples(s.name)
    first = min([x.time_millis for x in s.snapshots[:1]] + [x.time_ms for x in samples[:1]], default=now_ms)
    return float(max(first, now_ms - 86_400_000)), float(now_ms)


def _timeline(service: "Service", s: TableSummary, span: tuple[float, float], tags: Sequence[TagInfo]) -> str:
    rows: dict[str, list[Mark]] = {}
    for x in s.snapshots:
        kind = x.commit_kind.value
        rows.setdefault(f"{kind.lower()} snapshots", []).append(
            Mark(x.time_millis, f"snapshot {x.id} {kind} at {_utc(x.time_millis)}: {x.delta_record_count} records",
                 KIND_COLORS.get(kind, PALETTE[4])))
    for t in tags:
        rows.setdefault("tags made", []).append(
            Mark(t.create_time_millis, f"tag {t.name} of snapshot {t.snapshot_id}, made at "
                 f"{_utc(t.create_time_millis)}", PALETTE[6]))
    for e in service.history.events(s.name):
        row = "service: expiry" if e.duty == "snapshot-expiry" else "service: " + e.duty
        took = f" in {e.duration_s:.2f} s" if e.duration_s is not None else ""
        rows.setdefault(row, []).append(Mark(e.time_ms, f"{e.duty}: {e.detail}{took} at {_utc(e.time_ms)}",
                                             PALETTE[5] if e.duty == "snapshot-expiry" else PALETTE[4]))
    for err in service.errors:
        if err.table == s.name:
            rows.setdefault("service: errors", []).append(
                Mark(err.time_ms, f"{err.duty} failed at {_utc(err.time_ms)}: {err.error}", PALETTE[1]))
    if not rows:
        return '<p class="muted">no snapshots yet</p>'
    return timeline(rows, label=f"snapshot timeline of {s.name}", span=span)


def _runs_chart(service: "Service", s: TableSummary, span: tuple[float, float]) -> str:
    samples = service.history.samples(s.name)
    if not samples:
        return '<p class="muted">no samples yet: the service samples the table at each of its turns</p>'
    buckets = sorted({b for x in samples for b in x.runs})
    if len(buckets) <= MAX_SERIES:
        series = {f"bucket {b}": [(x.time_ms, float(x.runs[b])) for x in samples if b in x.runs] for b in buckets}
    else:
        series = {"max of the buckets": [(x.time_ms, float(max(x.runs.values(), default=0))) for x in samples],
                  "mean of the buckets": [(x.time_ms, sum(x.runs.values()) / max(1, len(x.runs)))
                                          for x in samples]}
    return line_chart(series, label=f"sorted runs per bucket of {s.name}", y_label="sorted runs",
                      limit=(f"num-sorted-run.stop-trigger = {s.stop_trigger}", float(s.stop_trigger)), span=span)


def table_page(service: "Service", name: str) -> tuple[int, str, bytes]:
    if name not in service.tables:
        return 404, HTML, _page("not found", f"<h1>no table {escape(name)}</h1><p><a href=\"/\">all tables</a></p>")
    now_ms = int(time.time() * 1000)
    try:
        s, handle = summarize(service, name)
    except Exception as e:  # noqa: BLE001 - e.g. damaged metadata: the page says so, with the service's errors
        unreadable = (f'<p><a href="/">all tables</a></p><h1 id="table-name">{escape(name)}</h1><p class="err" '
                f'id="unreadable">cannot read the table: {escape(" ".join(str(e).split()))}</p><h2>Recent errors</h2>'
                + _errors(service, name))
        return 200, HTML, _page(f"{name} · tablestore service", unreadable)
    latest = s.latest
    compaction, duration = _last_compaction(service, s, now_ms)
    span = _span(service, s, now_ms)
    facts = [
        ["latest snapshot", str(latest.id) if latest else "—"],
        ["committed", f"{_utc(latest.time_millis)} ({_age(latest.time_millis, now_ms)})" if latest else "—"],
        ["snapshots kept", str(len(s.snapshots))],
        ["data files", str(s.data_files)],
        ["buckets", str(len(s.runs))],
        ["max sorted runs / bucket", f"{s.max_runs} (stop trigger {s.stop_trigger})"],
        ["lease", _lease_text(service, s.lease, now_ms)],
        ["last compaction", compaction], ["its duration", duration],
    ]
    consumers = consumer_infos(handle.store, handle.log)
    next_id = (latest.id + 1) if latest else 1
    consumer_rows = [[escape(c.consumer_id), str(c.next_snapshot_id), str(max(0, next_id - c.next_snapshot_id)),
                      escape(", ".join(f"{p}: {o}" for p, o in sorted(c.log_offsets.items()))) or "—",
                      _age(c.update_time_millis, now_ms), "yes" if c.expired else "no"] for c in consumers]
    tags = tag_infos(handle.store)
    tag_rows = [[escape(t.name), str(t.snapshot_id), str(t.record_count), _utc(t.commit_time_millis),
                 _utc(t.create_time_millis)] for t in tags]
    recent = [[str(x.id), escape(x.commit_kind.value), _utc(x.time_millis), str(x.total_record_count),
               str(x.delta_record_count)] for x in s.snapshots[-15:][::-1]]
    events = [[_utc(e.time_ms), escape(e.duty), escape(e.detail),
               f"{e.duration_s:.2f} s" if e.duration_s is not None else "—"]
              for e in service.history.events(name)[-15:][::-1]]
    body = [
        f'<p><a href="/">all tables</a></p><h1 id="table-name">{escape(name)}</h1>',
        f'<p class="muted" id="comment">{escape(s.comment)}</p>' if s.comment else "",
        _rows(["", ""], facts, css_id="facts"),
        "<h2>Snapshot timeline</h2><p class=\"muted\">The table's snapshots by kind (commits: APPEND, "
        "compactions: COMPACT, OVERWRITE) and what the service did: compactions it committed, snapshots it expired "
        "(expired snapshots are gone from the rows above), its other duties and its errors. Hover a mark for "
        "details.</p>",
        _timeline(service, s, span, tags),
        "<h2>Sorted runs per bucket</h2><p class=\"muted\">Sampled at the end of each of the service's turns of "
        "this table (kept in memory: since the service started). A write waits when a bucket passes the stop "
        "trigger.</p>",
        _runs_chart(service, s, span),
        "<h2>Consumers</h2><p class=\"muted\">A consumer's <b>lag</b> is how many snapshots it has not read all of: "
        "the latest snapshot id + 1 − its next snapshot id (0: it is up to date). Expiry keeps every snapshot a live "
        "consumer still needs.</p>",
        _rows(["consumer", "next snapshot", "lag (snapshots)", "log offsets", "updated", "expired"], consumer_rows,
              numeric=(1, 2), empty="no consumers", css_id="consumers"),
        "<h2>Tags</h2>",
        _rows(["tag", "snapshot", "records", "snapshot committed", "tag created"], tag_rows, numeric=(1, 2),
              empty="no tags", css_id="tags"),
        "<h2>Recent snapshots</h2>",
        _rows(["id", "kind", "committed", "records", "delta records"], recent, numeric=(0, 3, 4),
              empty="no snapshots", css_id="snapshots"),
        "<h2>The service's recent duties</h2>",
        _rows(["time", "duty", "what", "took"], events, empty="none recorded since the service started",
              css_id="events"),
        "<h2>Recent errors</h2>",
        _errors(service, name),
    ]
    return 200, HTML, _page(f"{name} · tablestore service", "".join(body))
