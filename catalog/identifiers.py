"""The one rule for database and table names (and partition column names, which become directory names).

A name is 1 to 128 characters from ASCII letters, digits, `_` and `-`, and does not start with `-`. Nothing else:
no `.`, `/`, `\\`, spaces, newlines or other control characters, so a name is always one safe directory name and
can never escape the warehouse. The rule is checked with `fullmatch` (a `$` would let a trailing newline through).
"""
from __future__ import annotations

import re

from catalog.errors import InvalidIdentifierError

MAX_NAME_LENGTH = 128
NAME_RULE = f"1 to {MAX_NAME_LENGTH} characters: ASCII letters, digits, '_' and '-', not starting with '-'"
_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9_\-]{{0,{MAX_NAME_LENGTH - 1}}}", re.ASCII)


def check_name(name: object, what: str) -> str:
    """`name` when it follows the rule; InvalidIdentifierError naming the rule otherwise."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        shown = repr(name) if not isinstance(name, str) or len(name) <= 60 else repr(name[:60] + "...")
        extra = f" ({len(name)} characters)" if isinstance(name, str) and len(name) > MAX_NAME_LENGTH else ""
        raise InvalidIdentifierError(f"invalid {what} name {shown}{extra}: use {NAME_RULE}")
    return name
