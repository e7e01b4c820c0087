"""Secrets among options: which option keys hold one, and the options as a person or another process may see them.

A key holds a secret when one of its words (split at '.', '-' and '_', case-insensitive) is `secret`, `password`,
`passwd`, `token`, `credential(s)` or `jaas` (Kafka's `sasl.jaas.config` carries the password inside), or when its last
word is `key` or `keys` (`s3.access-key`, `s3.secret-key`, `api-key`; not `log.key.format`, whose key is the record's,
nor a key of rows: `bucket-key`, `primary-key`, `sort-key`, ...).
The table keeps the real value (its schema file, which the warehouse's own access rules guard, as Paimon's and
Delta's table properties do); everything that shows options (`Table.describe()`, `tablestore describe`, DESCRIBE
DETAIL, `$schemas`, Spark's table properties, errors and logs) shows `REDACTED` in its place.
"""
from __future__ import annotations

import re
from typing import Mapping, TypeVar

REDACTED = "*********(redacted)"
"""What a secret's value is shown as (Spark's own redaction text)."""

_WORDS = re.compile(r"[.\-_]+")
_SECRET_WORDS = frozenset({"secret", "password", "passwd", "token", "credential", "credentials", "jaas"})
_LAST_WORDS = frozenset({"key", "keys"})
_ROW_KEYS = frozenset({"bucket", "primary", "sort", "partition", "record", "message", "row", "foreign", "unique",
                       "join", "distribution"})

V = TypeVar("V")

SPARK_REDACTION_REGEX = ("(?i)" + "|".join(sorted(_SECRET_WORDS)) + "|[._-]("
                         + "|".join(sorted(_LAST_WORDS)) + ")$")
"""The rule as Spark's `spark.redaction.regex` (which Spark applies to its configuration in the UI, the event log
and the SQL tab's options): a key containing a secret word, or ending in a key word. Looser than `is_secret` (a
word inside a longer word matches too), as Spark's own default (`(?i)secret|password|token|access[.]?key`) is."""


def is_secret(key: str) -> bool:
    """Whether option `key` holds a secret (see the module's rule)."""
    words = [w for w in _WORDS.split(key.lower()) if w]
    if not words:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    return words[-1] in _LAST_WORDS and (len(words) < 2 or words[-2] not in _ROW_KEYS)


def redact_options(options: Mapping[str, V]) -> dict[str, V | str]:
    """`options` with every secret's value replaced by `REDACTED`."""
    return {k: REDACTED if is_secret(k) else v for k, v in options.items()}


def redact_value(key: str, value: object) -> str:
    """`value` as it may be shown for option `key`."""
    return REDACTED if is_secret(key) else str(value)


def scrub(text: str, options: Mapping[str, object]) -> str:
    """`text` (an error or a log line) with the value of every secret among `options` replaced by `REDACTED`
    (values shorter than 4 characters are left: they would blank out ordinary words)."""
    for key, value in options.items():
        if is_secret(key) and isinstance(value, str) and len(value) >= 4:
            text = text.replace(value, REDACTED)
    return text
