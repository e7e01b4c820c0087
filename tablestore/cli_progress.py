"""A progress bar for long CLI commands (rich), drawn on stderr only when it is a terminal."""
from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

Callback = Callable[[int, int], None]


@contextlib.contextmanager
def progress_bar(*, enabled: bool, description: str) -> Iterator[Callback | None]:
    """A `progress(done, total)` callback (bytes) that draws a bar, or None when not on a terminal / not enabled."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
