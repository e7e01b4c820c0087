"""A real headless browser for the tests: Debian's `chromium`, driven by its own command line (no Playwright).

    python tests/browser.py install    # apt-get install chromium when /usr/bin/chromium is missing (as root)

`chromium_or_skip()` finds the browser, installing it once with `apt-get install -y --no-install-recommends
chromium` when it is missing and this process runs as root (a test machine); the browser tests skip, saying why,
only when that is not possible. `dump_dom(url)` is the DOM after the page rendered (`--dump-dom`),
`screenshot(url, path)` a PNG of the page (`--screenshot`).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[1] / ".cache" / "screenshots"
"""Where the browser tests keep their screenshots (under /.cache/: ignored by git)."""

_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--hide-scrollbars", "--disable-dev-shm-usage"]


def install() -> str | None:
    """The browser's path, after installing Debian's `chromium` if it is missing; None and why when it cannot be."""
    found = shutil.which("chromium") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    if found:
        return found
    if os.geteuid() != 0:
        raise RuntimeError(f"{CHROMIUM} is missing and this is not root: apt-get install chromium")
    lock = Path(tempfile.gettempdir()) / "tablestore-chromium-install.lock"
    with open(lock, "w") as f:   # one install at a time (pytest-xdist workers, two sessions)
        fcntl.flock(f, fcntl.LOCK_EX)
        if not os.path.exists(CHROMIUM):
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            cmd = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
            if done.returncode != 0:   # a stale package list: update once, then try again
                subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
            if done.returncode != 0:
                tail = " ".join(done.stderr.split()[-30:])
                raise RuntimeError(f"apt-get install chromium failed ({done.returncode}): {tail}")
    return CHROMIUM


def chromium_or_skip() -> str:
    import pytest
    try:
        path = install()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"no headless browser: {e}")
    assert path is not None
    return path


def _run(browser: str, args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="tablestore-chromium-") as profile:
        cmd = [browser, *_FLAGS, f"--user-data-dir={profile}", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=profile)
    if done.returncode != 0:
        raise AssertionError(f"chromium {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done


def dump_dom(browser: str, url: str, timeout_s: float = 60) -> str:
    """The page's DOM after it loaded, serialised (`--dump-dom`)."""
    return _run(browser, ["--dump-dom", url], timeout_s).stdout


def screenshot(browser: str, url: str, path: Path, *, width: int = 1280, height: int = 1600,
               timeout_s: float = 60) -> Path:
    """A PNG of the page's first `width` x `height` pixels at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _run(browser, [f"--screenshot={path}", f"--window-size={width},{height}", url], timeout_s)
    assert path.exists() and path.stat().st_size > 0, f"no screenshot at {path}"
    return path


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        print(install())
    else:
        sys.exit(__doc__)
