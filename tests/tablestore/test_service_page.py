"""The service's status page (`/`, `/table/<db>.<table>`) in a real headless browser (Debian's chromium,
tests/browser.py): the pages load, their numbers are `describe()`'s and `snapshots()`'s, a consumer's lag, a tag
and a duty's error show, and HTML in a table comment or a tag name stays text; a table another service holds
names its holder; 50 tables render quickly. Screenshots go to .cache/screenshots/ (ignored by git)."""
from __future__ import annotations

import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pytest

import tablestore
from tablestore.service import Intervals, Service, ServiceConfig
from tablestore.service.server import ServiceServer
from browser import SCREENSHOTS, chromium_or_skip, dump_dom, screenshot

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
FAST = Intervals(compaction_s=0.05, expiry_s=0.05, orphan_s=3600)


class Dom(HTMLParser):
    """The text of each table (by id: rows of cell texts), of each element with an id, and every element's id."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.texts: dict[str, str] = {}
        self.ids: list[str] = []
        self.tags: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._open: list[tuple[str, str | None]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        ident = dict(attrs).get("id")
        self.tags.append(tag)
        if tag == "div" and self._cell is not None:
            self._cell.append("\n")   # a cell's second line (a table's comment under its name)
        if ident:
            self.ids.append(ident)
            self.texts[ident] = ""
        if tag in ("br", "img", "meta", "link", "input", "hr"):
            return
        self._open.append((tag, ident))
        if tag == "table" and ident:
            self._table = ident
            self.tables[ident] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            open_tag, _ = self._open.pop()
            if open_tag == tag:
                break
        if tag in ("td", "th") and self._table and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        for _, ident in self._open:
            if ident:
                self.texts[ident] += data

    def rows(self, table: str) -> list[list[str]]:
        """The body rows (the header row, made of <th>, left out)."""
        return [r for r in self.tables.get(table, []) if r][1:] if table != "facts" else self.tables["facts"]


def make(root: Path, name: str, writes: int, comment: str | None = None, **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(str(root))
    cat.create_database(name.split(".")[0], ignore_if_exists=True)
    t = cat.create_table(name, SCHEMA, primary_key=["id"], options={"log.system": "none", **options},
                         comment=comment)
    for i in range(writes):
        t.write(pa.table({"id": [i, i + 100], "v": [f"v{i}", "x"]}, schema=SCHEMA))
    return t


@pytest.fixture(scope="module")
def browser() -> str:
    return chromium_or_skip()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Service, str]]:
    service = Service(ServiceConfig(str(tmp_path), intervals=FAST))
    server = ServiceServer(service, 0)
    try:
        yield service, server.url
    finally:
        server.close()
        service.stop()


def max_runs(t: tablestore.Table) -> int:
    return max((n for p in t.describe()["partitions"] for n in p["sorted_runs"].values()), default=0)  # type: ignore


def test_the_pages_in_a_browser_show_the_tables_numbers(tmp_path: Path, browser: str,
                                                        served: tuple[Service, str]) -> None:
    service, url = served
    orders = make(tmp_path, "db.orders", 5, **{"write-only": "true", "num-sorted-run.compaction-trigger": "3"})
    events = make(tmp_path, "db.events", 3, comment="clicks, one row per event")
    events.create_tag("release-1")
    events.reset_consumer("dashboard", snapshot=2)
    service.run_once()   # compacts db.orders
    orders.write(pa.table({"id": [7], "v": ["later"]}, schema=SCHEMA))
    events.write(pa.table({"id": [8], "v": ["later"]}, schema=SCHEMA))
    time.sleep(0.06)
    service.run_once()

    home = Dom(dump_dom(browser, url + "/"))
    rows = {r[0].split("\n")[0].strip(): r for r in home.rows("tables")}
    assert set(rows) == {"db.orders", "db.events"}
    for t in (orders, events):
        detail = t.describe()
        name, latest, _, kept, files, runs, lease, compaction, _ = rows[t.name]
        assert int(latest) == t.latest_snapshot_id() == detail["latest_snapshot"]["id"]  # type: ignore[index]
        assert int(kept) == len(t.snapshots()) == detail["snapshot_count"]
        assert int(files) == detail["file_count"] == len(t.files())
        assert int(runs) == max_runs(t)
        assert lease == "this service"
    compacts = [s.id for s in orders.snapshots() if s.kind == "COMPACT"]
    assert compacts and rows["db.orders"][7].startswith(f"#{compacts[-1]},") and rows["db.orders"][8].endswith(" s")
    assert "clicks, one row per event" in rows["db.events"][0]
    screenshot(browser, url + "/", SCREENSHOTS / "service-overview.png", height=500)

    page = Dom(dump_dom(browser, f"{url}/table/db.events"))
    facts = dict((r[0], r[1]) for r in page.rows("facts"))
    assert facts["latest snapshot"] == str(events.latest_snapshot_id())
    assert facts["snapshots kept"] == str(len(events.snapshots()))
    assert facts["data files"] == str(events.describe()["file_count"])
    assert facts["max sorted runs / bucket"].split()[0] == str(max_runs(events))
    assert [int(r[0]) for r in page.rows("snapshots")] == [s.id for s in events.snapshots()][::-1]
    assert [r[1] for r in page.rows("snapshots")] == [s.kind for s in events.snapshots()][::-1]
    consumer = page.rows("consumers")[0]
    assert consumer[:3] == ["dashboard", "2", str(events.latest_snapshot_id() + 1 - 2)]   # type: ignore[operator]
    assert "lag" in page.texts.get("consumers", "") or "lag (snapshots)" in page.tables["consumers"][0]
    tag = page.rows("tags")[0]
    assert tag[:2] == ["release-1", str(events.tags()[0].snapshot_id)]
    assert page.tags.count("svg") == 2 and "circle" in page.tags and "polyline" in page.tags
    screenshot(browser, f"{url}/table/db.events", SCREENSHOTS / "service-table.png")

    page = Dom(dump_dom(browser, f"{url}/table/db.orders"))
    events_done = page.rows("events")
    assert any(r[1] == "compaction" and r[2] == f"committed snapshot {compacts[-1]}" for r in events_done)


def test_a_failing_duty_shows_on_the_pages(tmp_path: Path, browser: str, served: tuple[Service, str]) -> None:
    service, url = served
    broken = make(tmp_path, "db.broken", 3, **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    make(tmp_path, "db.fine", 2)
    Path(broken.path, "snapshot", "snapshot-1").write_text("{not json")   # damaged metadata
    service.run_once()
    assert any(e.table == "db.broken" for e in service.errors)
    home = Dom(dump_dom(browser, url + "/"))
    errors = home.rows("errors")
    assert any(r[1] == "db.broken" and r[2] == "snapshot-expiry" and "snapshot-1" in r[3] for r in errors)
    assert {r[0].split("\n")[0] for r in home.rows("tables")} == {"db.broken", "db.fine"}   # the page still loads
    page = Dom(dump_dom(browser, f"{url}/table/db.broken"))
    assert "snapshot-1" in page.texts["unreadable"]
    assert any(r[2] == "snapshot-expiry" for r in page.rows("errors"))
    screenshot(browser, url + "/", SCREENSHOTS / "service-errors.png", height=500)


def test_html_in_a_table_comment_or_a_tag_name_stays_text(tmp_path: Path, browser: str,
                                                          served: tuple[Service, str]) -> None:
    service, url = served
    comment = "<script>document.title='injected'</script><b id=\"injected\">bold</b>"
    tag = "<img id=injected-tag src=x onerror=\"document.title='injected'\">"
    t = make(tmp_path, "db.t", 2, comment=comment)
    t.create_tag(tag)
    service.run_once()
    for path in ("/", "/table/db.t"):
        html = dump_dom(browser, url + path)
        dom = Dom(html)
        assert "injected" not in dom.ids and "injected-tag" not in dom.ids
        assert "script" not in dom.tags and "img" not in dom.tags
        assert "<title>tablestore service</title>" in html or "<title>db.t · tablestore service</title>" in html
        assert comment in (dom.texts.get("comment", "") if path != "/" else "".join(sum(dom.rows("tables"), [])))
    assert dom.rows("tags")[0][0] == tag


def test_the_overview_of_50_tables_is_quick(tmp_path: Path, served: tuple[Service, str]) -> None:
    service, url = served
    for i in range(50):
        make(tmp_path, f"db.t{i:02d}", 2)
    service.run_once()
    began = time.monotonic()
    with urllib.request.urlopen(url + "/", timeout=30) as response:
        html = response.read().decode()
    took = time.monotonic() - began
    assert len(Dom(html).rows("tables")) == 50
    assert took < 3, f"the overview of 50 tables took {took:.2f} s"


def test_a_table_another_service_holds_names_its_holder(tmp_path: Path, served: tuple[Service, str]) -> None:
    service, url = served
    make(tmp_path, "db.t", 2)
    other = Service(ServiceConfig(str(tmp_path), intervals=FAST))
    try:
        other.run_once()   # takes the lease first
        service.run_once()
        assert set(other.held()) == {"db.t"} and not service.held()
        with urllib.request.urlopen(url + "/", timeout=30) as response:
            row = Dom(response.read().decode()).rows("tables")[0]
        assert row[0] == "db.t" and row[6].startswith(other.owner) and "expires" in row[6]
        other.stop()   # releases it
        with urllib.request.urlopen(url + "/", timeout=30) as response:
            row = Dom(response.read().decode()).rows("tables")[0]
        assert row[6] == f"free (last {other.owner})"
    finally:
        other.stop()


def test_the_service_records_what_its_expiry_and_compaction_did(tmp_path: Path,
                                                                served: tuple[Service, str]) -> None:
    service, url = served
    t = make(tmp_path, "db.t", 4, **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms",
                                     "write-only": "true", "num-sorted-run.compaction-trigger": "2"})
    service.run_once()   # compacts (snapshot 5), then expires 1..4
    assert [s.id for s in t.snapshots()] == [5] and t.snapshots()[0].kind == "COMPACT"
    with urllib.request.urlopen(url + "/table/db.t", timeout=30) as response:
        html = response.read().decode()
    done = {(r[1], r[2]) for r in Dom(html).rows("events")}
    assert {("compaction", "committed snapshot 5"), ("snapshot-expiry", "expired snapshots 1..4")} <= done
    assert "service: expiry (1)" in html and "compact snapshots (1)" in html   # the timeline's rows
    samples = service.history.samples("db.t")
    assert len(samples) == 1 and samples[0].runs == {"0": 1} and samples[0].earliest_snapshot == 5
