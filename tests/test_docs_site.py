"""The docs as a site (mkdocs.yml): it builds with `mkdocs build --strict` (a broken link or anchor fails), and the
home page's Quickstart runs as written."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INDEX = ROOT / "docs" / "index.md"
FENCE = re.compile(r"^(`{3,}|~{3,})\s*(.*)$")
HEADING = re.compile(r"^(#{1,6}) ")


@dataclass
class Block:
    """A run of Markdown text (`info` None) or one fenced code block (`info`: its info string, `lines`: its body)."""

    info: str | None
    lines: list[str] = field(default_factory=list)


def blocks(markdown: str) -> list[Block]:
    out: list[Block] = [Block(None)]
    fence = ""
    for line in markdown.splitlines():
        match = FENCE.match(line.strip())
        if not fence and match:
            fence = match.group(1)
            out.append(Block(match.group(2).strip()))
        elif fence and match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                and not match.group(2):
            fence = ""
            out.append(Block(None))
        else:
            out[-1].lines.append(line)
    return out


def section(markdown: str, heading: str) -> list[Block]:
    """The blocks under `heading` (e.g. "## Quickstart") up to the next heading of the same or a higher level; a
    `# comment` inside a code block is no heading."""
    level = len(heading.split(" ")[0])
    found: list[Block] | None = None
    for block in blocks(markdown):
        if block.info is not None:
            if found is not None:
                found.append(block)
            continue
        text = Block(None)
        for line in block.lines:
            match = HEADING.match(line)
            if match and line.strip() == heading:
                found, text = [], Block(None)
                continue
            if match and found is not None and len(match.group(1)) <= level:
                found.append(text)
                return found
            text.lines.append(line)
        if found is not None:
            found.append(text)
    assert found is not None, f"no {heading!r} heading"
    return found


def python_code(found: list[Block]) -> list[str]:
    return ["\n".join(b.lines) for b in found if b.info is not None and b.info.split(" ")[0] == "python"]


def test_quickstart_extraction() -> None:
    text = ("# T\nbefore\n## Quickstart\ntext\n```python\nx = 1\n# not a heading\n```\n"
            "```bash\nls\n```\n### sub\n```python\ny = 2\n```\n## Next\n```python\nz = 3\n```\n")
    found = section(text, "## Quickstart")
    assert python_code(found) == ["x = 1\n# not a heading", "y = 2"]
    assert found[0].lines == ["text"]
    assert python_code(section("```python\nw = 0\n```\n## Quickstart\n```python\nx = 1\n```\n",
                               "## Quickstart")) == ["x = 1"]


def _env() -> dict[str, str]:
    """This environment without TABLESTORE_* variables (which could give the Quickstart's catalog options)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("TABLESTORE_")}


def test_site_builds_strictly(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (the docs extra: pip install -e '.[docs]')")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**_env(), "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    for page in ("index.html", "performance/index.html", "options/index.html"):
        assert (site / page).is_file(), page


def test_quickstart_runs(tmp_path: Path) -> None:
    code = python_code(section(INDEX.read_text(), "## Quickstart"))
    assert code, "the Quickstart has no ```python block"
    script = tmp_path / "quickstart.py"
    script.write_text("\n\n".join(code) + "\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=_env())
    assert done.returncode == 0, f"the Quickstart failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    assert "'name': 'kiwi'" in done.stdout
