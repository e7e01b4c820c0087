"""From table options to the table's log store: defaults resolved at CREATE TABLE, FLIP-188's rules on which
combinations are allowed, and the typed `LogStoreOptions`."""
from __future__ import annotations

import uuid
from typing import Mapping, Sequence

from catalog.errors import InvalidOptionError, InvalidTableError
from catalog.options import (
    BUCKET,
    DEBEZIUM_AVRO,
    DEBEZIUM_JSON,
    LOG_CHANGELOG_MODE,
    LOG_CONSISTENCY,
    LOG_FORMAT,
    LOG_KEY_FORMAT,
    LOG_PROPERTIES,
    LOG_RETENTION,
    LOG_SCAN,
    LOG_SCAN_TIMESTAMP,
    LOG_SYSTEM,
    LOG_TOPIC,
    UPSERT_FORMAT,
)
from catalog.table_options import TableOptions
from logstore import LogFormatError, LogStoreOptions, get_format

import pyarrow as pa

BOOTSTRAP = f"{LOG_PROPERTIES.key}.bootstrap.servers"


def resolve_log_options(identifier: str, options: Mapping[str, str], primary_key: Sequence[str]) -> dict[str, str]:
    """Fill `log.system` (kafka when bootstrap servers are configured, else none) and `log.topic`, then check the
    combination is one FLIP-188 allows. Returns the options to store with the table."""
    out = dict(options)
    if LOG_SYSTEM.key not in out:
        out[LOG_SYSTEM.key] = "kafka" if out.get(BOOTSTRAP) else "none"
    if out[LOG_SYSTEM.key] == "none":
        return out
    if not out.get(BOOTSTRAP):
        raise InvalidOptionError(
            f"table {identifier!r}: log.system is kafka but no bootstrap servers are configured: set "
            f"'{BOOTSTRAP}' (or 'table-storage.{BOOTSTRAP}' for the session)"
        )
    if LOG_TOPIC.key not in out:
        out[LOG_TOPIC.key] = f"{identifier}.{uuid.uuid4().hex[:12]}"
    t = TableOptions(out)
    consistency, mode, fmt = t.get(LOG_CONSISTENCY), t.get(LOG_CHANGELOG_MODE), t.get(LOG_FORMAT)
    if not primary_key:
        for what, bad in (("log.consistency", consistency == "eventual"), ("log.changelog-mode", mode == "upsert"),
                          ("log.format", fmt == "upsert")):
            if bad:
                raise InvalidTableError(
                    f"table {identifier!r}: {what} = {out[what]!r} needs a primary key (FLIP-188: a table without "
                    "one has no key to deduplicate or normalize by)"
                )
    if mode == "all" and consistency == "eventual":
        raise InvalidTableError(
            f"table {identifier!r}: log.changelog-mode = 'all' requires log.consistency = 'transactional'"
        )
    if fmt == "upsert" and mode == "all":
        raise InvalidTableError(
            f"table {identifier!r}: log.format = 'upsert' cannot store UPDATE_BEFORE: use log.changelog-mode "
            "'upsert' (or 'auto') or a debezium format"
        )
    return out


def changelog_mode(options: TableOptions, has_primary_key: bool) -> str:
    mode = options.get(LOG_CHANGELOG_MODE)
    if mode == "auto":
        return "upsert" if has_primary_key else "all"
    return mode


def log_store_options(options: TableOptions, has_primary_key: bool) -> LogStoreOptions | None:
    """The typed log-store options of a table, or None when it has no log (`log.system` = none)."""
    if options.get_optional(LOG_SYSTEM) != "kafka":
        return None
    format_options = {
        **{f"{DEBEZIUM_JSON.key}.{k}": v for k, v in options.map_option(DEBEZIUM_JSON).items()},
        **{f"{DEBEZIUM_AVRO.key}.{k}": v for k, v in options.map_option(DEBEZIUM_AVRO).items()},
        **{f"{UPSERT_FORMAT.key}.{k}": v for k, v in options.map_option(UPSERT_FORMAT).items()},
    }
    return LogStoreOptions(
        topic=options.get(LOG_TOPIC),
        partitions=options.get(BUCKET),
        format=options.get(LOG_FORMAT),
        key_format=options.get(LOG_KEY_FORMAT),
        changelog_mode=changelog_mode(options, has_primary_key),  # type: ignore[arg-type]
        consistency=options.get(LOG_CONSISTENCY),  # type: ignore[arg-type]
        properties=options.map_option(LOG_PROPERTIES),
        format_options=format_options,
        retention_ms=options.get_optional(LOG_RETENTION),
        scan=options.get(LOG_SCAN),  # type: ignore[arg-type]
        scan_timestamp_ms=options.get_optional(LOG_SCAN_TIMESTAMP),
    )


def check_format_options(identifier: str, log: LogStoreOptions, schema: pa.Schema, primary_key: Sequence[str]) -> None:
    """Build the value format once so bad format options fail at CREATE TABLE, naming the option."""
    try:
        get_format(log.format, schema, primary_key, log.format_options)
    except LogFormatError as e:
        raise InvalidOptionError(f"table {identifier!r}: {e}") from None
