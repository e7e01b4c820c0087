"""The demo's progress when its output is piped (issue 52: the live box, drawn into a file, ran into the lines
after it): one plain line per update, however long, never a box nor a line wrapped at the console's width."""
from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from tablestore.demo_cdc import DemoState, _Status


def test_piped_progress_is_one_plain_line_per_update() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80)   # a file: not a terminal
    progress = SimpleNamespace(events=123_456, events_per_s=4321.0, lag=17, snapshots=42, last_commit_s=1.25,
                               state="run", schema_changes=["added column note (string)"])
    with _Status(console, DemoState(produced=200_000, downstream_changes=99), SimpleNamespace(progress=progress)) as s:
        s.update(force=True)
        s.update()              # within the interval: nothing more
        s.update(force=True)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert len(line) > 80 and "source events produced: 200,000; ingest: 123,456 events" in line
        assert "added column note (string)" in line and "compaction: 0 runs" in line
        assert not set(line) & set("┏┃━│─")   # no box drawing
