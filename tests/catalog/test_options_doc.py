from __future__ import annotations

from catalog import docgen
from catalog.options import ALL_OPTIONS


def test_options_page_is_current() -> None:
    assert docgen.DOC_PATH.read_text() == docgen.render(), "docs/options.md is stale: run python -m catalog.docgen"


def test_every_option_is_on_the_page() -> None:
    text = docgen.render()
    for option in ALL_OPTIONS:
        assert f"`{option.key}" in text
        assert option.description.split(".")[0].replace("|", "/") in text
