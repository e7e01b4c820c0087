"""Every table option, declared once (key, type, default, doc), and their checks; `catalog.table_options` reads
a table's options typed.

Session-level defaults carry the `table-storage.` prefix (FLIP-188 "Configuration"); per-table options do not
and win over session ones. `docs/options.md` is generated from `ALL_OPTIONS` (`python -m catalog.docgen`).
"""
from __future__ import annotations

import difflib
from typing import Any, Mapping, Sequence

from catalog.errors import InvalidOptionError
from catalog.log_option_decls import (  # noqa: F401 - declared there, part of ALL_OPTIONS
    LOG_SYSTEM, LOG_PROPERTIES, LOG_TOPIC, LOG_RETENTION, LOG_FORMAT, LOG_KEY_FORMAT, LOG_CHANGELOG_MODE,
    LOG_CONSISTENCY, LOG_SCAN, LOG_SCAN_TIMESTAMP, DEBEZIUM_JSON, DEBEZIUM_AVRO, UPSERT_FORMAT,
    UPSERT_MATERIALIZE_STRATEGY, UPSERT_MATERIALIZE_THRESHOLD_HIGH, UPSERT_MATERIALIZE_THRESHOLD_LOW,
    UPSERT_MATERIALIZE_TTL)
from catalog.optiontypes import ConfigOption
from filestore import AGGREGATE_FUNCTIONS, DEFAULT_AGGREGATE, ENGINES, RETRACTING

SESSION_PREFIX = "table-storage."

BUCKET: ConfigOption[int] = ConfigOption(
    "bucket", "int", "1",
    "Number of buckets of the file store, and of partitions of the table's Kafka topic. A record goes to a bucket "
    "by the hash of its primary key (or of the whole row without one). Fixed once the table is created.", min=1,
)
FILE_FORMAT: ConfigOption[str] = ConfigOption(
    "file.format", "enum", "parquet", "Format of the data files.", choices=("parquet", "orc")
)
FILE_COMPRESSION: ConfigOption[str] = ConfigOption(
    "file.compression", "enum", "lz4",
    "Compression codec of the data files. lz4 (the default; Parquet's LZ4_RAW) makes files as small as snappy (plain "
    "Parquet's default) and writes as fast, and decompresses in about half the time, which halves the decoding of a "
    "read or a compaction; zstd makes files about a third smaller and writes a bulk insert about a quarter slower.",
    choices=("zstd", "snappy", "lz4", "gzip", "none"),
)
WRITE_BUFFER_SIZE: ConfigOption[int] = ConfigOption(
    "write-buffer-size", "memory", "64 mb",
    "In-memory size of a bucket's memtable before it is flushed into a new sorted run.", min=1024,
)
TARGET_FILE_SIZE: ConfigOption[int] = ConfigOption(
    "target-file-size", "memory", "128 mb", "Size at which a sorted run rolls over to a new data file.", min=1024
)
COMMIT_MAX_RETRIES: ConfigOption[int] = ConfigOption(
    "commit.max-retries", "int", "10",
    "How many times a commit retries when other writers published a snapshot first (at least: retries go on while "
    "`commit.timeout` is left).", min=0,
)
COMMIT_TIMEOUT: ConfigOption[int] = ConfigOption(
    "commit.timeout", "duration", "1 min",
    "Time budget of a commit's retries: a commit (or a write re-planned after another writer committed to its "
    "buckets) keeps retrying while either `commit.max-retries` or this time is left, so a writer waits while "
    "others hold its buckets, then makes progress. `0 ms`: the count alone.", min=0,
)
COMMIT_MIN_RETRY_WAIT: ConfigOption[int] = ConfigOption(
    "commit.min-retry-wait", "duration", "10 ms",
    "Shortest wait before a commit retries. Waits double per retry up to `commit.max-retry-wait`, each drawn at "
    "random below that bound (full jitter), so concurrent writers stop colliding.", min=0,
)
COMMIT_MAX_RETRY_WAIT: ConfigOption[int] = ConfigOption(
    "commit.max-retry-wait", "duration", "10 s", "Longest wait before a commit retries.", min=0,
)
MANIFEST_MERGE_MIN_COUNT: ConfigOption[int] = ConfigOption(
    "manifest.merge-min-count", "int", "30",
    "When a snapshot would reference more manifests than this, they are merged into one of live files only.", min=1,
)
SNAPSHOT_NUM_RETAINED_MIN: ConfigOption[int] = ConfigOption(
    "snapshot.num-retained.min", "int", "10", "Minimum number of snapshots expiration always keeps.", min=0
)
SNAPSHOT_NUM_RETAINED_MAX: ConfigOption[int] = ConfigOption(
    "snapshot.num-retained.max", "int", "2147483647", "Maximum number of snapshots expiration keeps.", min=0
)
SNAPSHOT_TIME_RETAINED: ConfigOption[int] = ConfigOption(
    "snapshot.time-retained", "duration", "1 h",
    "Snapshots younger than this are kept (between the minimum and maximum counts).", min=0,
)
CONSUMER_EXPIRATION_TIME: ConfigOption[int] = ConfigOption(
    "consumer.expiration-time", "duration", None,
    "A consumer (a change read with a consumer id) not updated for this long is expired: it no longer keeps "
    "snapshots from expiry, and expiry deletes it. Unset: consumers never expire.", min=1,
)
PARTITION_EXPIRATION_TIME: ConfigOption[int] = ConfigOption(
    "partition.expiration-time", "duration", None,
    "Partitions whose time (read from their values: `partition.timestamp-pattern`, "
    "`partition.timestamp-formatter`) is older than now minus this are dropped, in one OVERWRITE snapshot, by "
    "`expire_partitions` and the service. Unset: partitions never expire.", min=1,
)
PARTITION_EXPIRATION_CHECK_INTERVAL: ConfigOption[int] = ConfigOption(
    "partition.expiration-check-interval", "duration", "1 h",
    "How often the service checks a table for expired partitions.", min=1,
)
PARTITION_EXPIRATION_STRATEGY: ConfigOption[str] = ConfigOption(
    "partition.expiration-strategy", "enum", "values-time",
    "How a partition's time is found: `values-time`, from its values. (Paimon also has `update-time`, the last "
    "time the partition was written; not supported yet.)", choices=("values-time",),
)
PARTITION_TIMESTAMP_PATTERN: ConfigOption[str] = ConfigOption(
    "partition.timestamp-pattern", "string", None,
    "How a partition's timestamp text is made from its values: `$column` stands for that partition column's value, "
    "e.g. `$dt` or `$dt $hour:00:00`. Every `$column` must be a partition column. Unset: the first partition "
    "column's value.",
)
PARTITION_TIMESTAMP_FORMATTER: ConfigOption[str] = ConfigOption(
    "partition.timestamp-formatter", "string", None,
    "Format of the partition timestamp text, a Java DateTimeFormatter pattern such as `yyyy-MM-dd`, `yyyyMMdd` or "
    "`yyyy-MM-dd HH:mm:ss` (letters y M d H h a m s S D E; quote literal text: `yyyy-MM-dd'T'HH`). Unset: "
    "`yyyy-MM-dd HH:mm:ss`, and date-only `yyyy-MM-dd` values are accepted too. A partition whose text does not "
    "parse is never expired (a warning names it).",
)
COMPACTION_TRIGGER: ConfigOption[int] = ConfigOption(
    "num-sorted-run.compaction-trigger", "int", "5",
    "Universal compaction: sorted runs in a bucket above which runs are merged.", min=1,
)
STOP_TRIGGER: ConfigOption[int] = ConfigOption(
    "num-sorted-run.stop-trigger", "int", None,
    "Sorted runs in a bucket at which a write waits for compaction: after its commit the write compacts every "
    "bucket above this many runs until it is back at it, retrying on conflicts (below it, a conflicting "
    "compaction is skipped and runs again after a later write). Default: `num-sorted-run.compaction-trigger` + 3. "
    "With `write-only` = true the write waits instead for `tablestore service`'s compaction, while a service holds "
    "the table's lease (none: it does not wait).", min=1,
)
COMPACTION_MAX_SIZE_AMP: ConfigOption[int] = ConfigOption(
    "compaction.max-size-amplification-percent", "int", "200",
    "Universal compaction: full compaction when the size of all runs but the oldest exceeds this percentage of "
    "the oldest run.", min=0,
)
COMPACTION_SIZE_RATIO: ConfigOption[int] = ConfigOption(
    "compaction.size-ratio", "int", "1",
    "Universal compaction: percentage flexibility when comparing sorted-run sizes for a size-ratio compaction.", min=0,
)

WRITE_ONLY: ConfigOption[bool] = ConfigOption(
    "write-only", "boolean", "false",
    "When true, writes never compact: compaction is left to `tablestore service` (dedicated compaction), "
    "`tablestore compact` or a dedicated job. While a service holds the table's lease, a write that leaves a bucket "
    "above `num-sorted-run.stop-trigger` sorted runs waits until the service has compacted it back.",
)
COMPACTION_OPTIMIZATION_INTERVAL: ConfigOption[int] = ConfigOption(
    "compaction.optimization-interval", "duration", None,
    "How often `tablestore service` runs a full compaction (every sorted run of a bucket merged into one) of a "
    "`write-only` table, besides its universal compactions. Unset: never.", min=1,
)
ORPHAN_FILES_OLDER_THAN: ConfigOption[int] = ConfigOption(
    "orphan-files.older-than", "duration", "1 d",
    "`tablestore service`'s orphan-file removal deletes files no snapshot references once they are older than "
    "this (younger ones may belong to a write in flight).", min=0,
)
TAG_AUTOMATIC_CREATION: ConfigOption[str] = ConfigOption(
    "tag.automatic-creation", "enum", "none",
    "`process-time`: `tablestore service` tags the table's latest snapshot at the end of each "
    "`tag.creation-period`, by the service machine's clock and local time zone, named after the period "
    "(`2026-12-03` daily, `2026-12-03 10` hourly). `none`: no automatic tags. (Paimon's `watermark` and `batch` "
    "are not supported.)", choices=("none", "process-time"),
)
TAG_CREATION_PERIOD: ConfigOption[str] = ConfigOption(
    "tag.creation-period", "enum", "daily",
    "The period of automatic tags: `daily`, `hourly` or `two-hours` (periods starting at even hours, named like "
    "hourly tags).", choices=("daily", "hourly", "two-hours"),
)
TAG_CREATION_DELAY: ConfigOption[int] = ConfigOption(
    "tag.creation-delay", "duration", "0 ms",
    "How long after a period's end its automatic tag is made (room for late writes); less than one period.", min=0,
)
TAG_NUM_RETAINED_MAX: ConfigOption[int] = ConfigOption(
    "tag.num-retained-max", "int", None,
    "Automatic tags kept at most: the service deletes the oldest automatic tags (by the period they name) beyond "
    "this. A tag is automatic when its name is a period's name in the format of `tag.creation-period`, as in "
    "Paimon; other tags are never deleted. Unset: unlimited.", min=1,
)

DELETION_VECTORS: ConfigOption[bool] = ConfigOption(
    "deletion-vectors.enabled", "boolean", "false",
    "When true, every commit marks the rows it supersedes (an older row of a key it writes, a deleted key) in "
    "deletion vectors, and a read is a plain scan of the files minus those rows, with no merge: faster reads, "
    "readable by other engines (see \"Read it from anything\"), for a lookup per commit. A primary-key table "
    "of the `deduplicate` merge engine without `sequence.field`; fixed when the table is created.",
)

DELTA_METADATA: ConfigOption[bool] = ConfigOption(
    "metadata.delta.enabled", "boolean", "false",
    "When true, every snapshot is also published as the next version of a Delta Lake table in the table's "
    "directory (`_delta_log/`), so delta-spark, delta-rs and other Delta readers read the table. Exact with "
    "`deletion-vectors.enabled`; otherwise a bucket is published once it is one sorted run without deletes (a "
    "compacted one); see \"Read it from anything\".",
)
ICEBERG_METADATA: ConfigOption[str] = ConfigOption(
    "metadata.iceberg.storage", "enum", "disabled",
    "`table-location`: every snapshot is also published as an Iceberg table snapshot under the table's directory "
    "(`metadata/`), so pyiceberg and other Iceberg readers read the table; `disabled`: none. Exact with "
    "`deletion-vectors.enabled`; otherwise a bucket is published once it is one sorted run without deletes (a "
    "compacted one); see \"Read it from anything\".",
    choices=("disabled", "table-location"),
)

CHANGE_TRACKING: ConfigOption[bool] = ConfigOption(
    "change-tracking", "boolean", "true",
    "Whether writes also go to the table's log (FLIP-188). False: the file store only; log readers do not see "
    "those rows. Every writer honours it (the table API, Spark's batch and streaming writes, SQL, ingest); a Spark "
    "write may set its own: `.option(\"change-tracking\", ...)`.",
)

CHANGELOG_NORMALIZE: ConfigOption[bool] = ConfigOption(
    "changelog.normalize", "boolean", "true",
    "What a reader of a primary-key table's changes gets from its log (`Table.read_changes`, Spark's "
    "`readStream.format(\"managed\")` and SQL `readStream.table`): `true`, the full changelog of its commits "
    "(FLIP-188): `+I` for a new key, `-U` (old row) then `+U` (new row) for a changed one, `-D` (old row) for a "
    "deleted one, nothing for a key no snapshot showed or a row rewritten unchanged, whatever `log.changelog-mode` "
    "and `log.consistency` are; `false`, the records as the log stores them (upsert mode: `+I`/`+U`/`-D`, no "
    "`-U`). Also per read: `.option(\"changelog.normalize\", ...)`, `read_changes(normalize=...)`. Tables without "
    "a primary key always give their stored `+I`/`-D` records. A table without a log streams each snapshot's "
    "changelog (`true`), or with `false`, when it keeps each key's newest row (`deduplicate`, no `sequence.field`), "
    "each snapshot's records as written (`+I` for a row written, `-D` for a delete), read from its new files alone.",
)

SINK_UPSERT_MATERIALIZE: ConfigOption[str] = ConfigOption(
    "sink.upsert-materialize", "enum", "auto",
    "Whether a Spark streaming changelog goes through the upsert materializer before the table (Flink's "
    "`table.exec.sink.upsert-materialize`), applied by `tablestore.spark.materialize_for_sink(df, table)`: `none` "
    "never, `force` always, `auto` when the input is a changelog (`_row_kind`) whose upsert key differs from the "
    "table's primary key or is unknown. Also per call: `upsert_materialize=`.",
    choices=("none", "force", "auto"),
)

SINK_SHUFFLE_BY_BUCKET: ConfigOption[bool] = ConfigOption(
    "sink.shuffle-by-bucket", "boolean", "true",
    "Whether a Spark batch write (SQL `INSERT`, `df.write.format(\"managed\")`) shuffles its rows by bucket, so that "
    "each bucket has one writer (FLIP-188) and the write adds one sorted run per bucket. `false`: each write task "
    "writes the rows it was given into every bucket they fall in, a sorted run per task and bucket, without the "
    "shuffle: a bulk load writes faster, and each bucket then holds up to as many new sorted runs as the write had "
    "tasks, which reads merge until a compaction rewrites them (the commit's own when it leaves "
    "`num-sorted-run.compaction-trigger` runs). A key that two tasks of one write both hold keeps "
    "the row of the later task (Spark's partition order). Only where the JVM writer writes: a table without "
    "partition columns or a log, with a one-column integer or date primary key, the default merge engine and "
    "Parquet files, written rows with exactly the table's columns; other writes shuffle. Also per write: "
    "`.option(\"sink.shuffle-by-bucket\", \"false\")`.",
)

INGEST_SCHEMA_EVOLUTION: ConfigOption[str] = ConfigOption(
    "ingest.schema-evolution", "enum", "add-columns",
    "What a CDC ingest job does when its source table's schema changes: `add-columns` adds the source's new columns "
    "to the table (nullable, at the end; rows written before read them as null) and widens a column whose type "
    "widened (int8 to int16 to int32 to int64, float32 to float64, a decimal's precision up at the same scale), "
    "through `Catalog.alter_table`; a column the source drops is written as null; any other change (a narrowed "
    "column, a column whose type changes otherwise, a key or partition column's type) stops the job with an error "
    "naming the column and both types. `fail` stops the job at any "
    "schema change, with the same error. Read by the ingest job; the table itself accepts `alter_table` either way.",
    choices=("add-columns", "fail"),
)

INGEST_UNAVAILABLE_VALUE: ConfigOption[str] = ConfigOption(
    "ingest.unavailable-value-placeholder", "string", "__debezium_unavailable_value",
    "The value a change data capture source sends in an update for a column whose value it does not have: "
    "Debezium's placeholder (its connector option `unavailable.value.placeholder`) for a PostgreSQL column stored "
    "out of line (TOAST) that the update left unchanged, under `REPLICA IDENTITY DEFAULT`. In a changelog write (rows "
    "with `_row_kind`: `tablestore ingest`, `read_cdc` into the `managed` sink, `Table.write`) of a primary-key "
    "table, a value column holding it (as text, its bytes in a binary column, `[text]` in a list of strings, its "
    "bytes as numbers in a list of integers: as Debezium sends them) keeps the key's stored value: the row is "
    "written and logged with that value (where the merge engine keeps older values for nulls, with null). Empty: "
    "no value is a placeholder.",
)
INGEST_TRUNCATE: ConfigOption[str] = ConfigOption(
    "ingest.truncate", "enum", "apply",
    "What a CDC ingest job does with a TRUNCATE of its source table (Debezium's `op: t`, which Debezium sends only "
    "when its connector's `skipped.operations` does not skip `t`, so a truncate that arrives is one the user asked "
    "to capture): `apply` empties the table in one snapshot (its log carries a `-D` for every row) at the "
    "truncate's place in the source's order, so the table stays equal to the source; `ignore` leaves the table "
    "as it is; `fail` stops the job with an error naming the record.",
    choices=("apply", "ignore", "fail"),
)

MERGE_ENGINE: ConfigOption[str] = ConfigOption(
    "merge-engine", "enum", "deduplicate",
    "How the rows of one primary key merge (fixed once the table is created): `deduplicate`, the newest row wins "
    "and `-D` deletes the key; `partial-update`, each column takes the newest non-null value (a null keeps the "
    "older one; `-U`/`-D` rows are refused); `aggregation`, each column aggregates with its "
    "`fields.<column>.aggregate-function`; `first-row`, the first row of a key wins and later ones are dropped "
    "(`-U`/`-D` rows are refused). Needs a primary key. The log of a table whose engine is not `deduplicate` (or "
    "that has a `sequence.field`) holds the merged rows' changelog, produced after each snapshot; without a log its "
    "changes are read from its snapshots, merged. See the concepts page, \"Merge engines\".",
    choices=ENGINES,
)
SEQUENCE_FIELD: ConfigOption[str] = ConfigOption(
    "sequence.field", "string", None,
    "A column, or several separated by commas, that orders the rows of one primary key instead of their arrival "
    "(rows with equal values, or nulls, which come first, in arrival order). With `deduplicate`, the row with the "
    "highest value wins; with `aggregation`, only the order-free functions (sum, count, max, min, bool_and, "
    "bool_or, last_value). Not with `first-row` or `partial-update`. Fixed once the table is created.",
)
FIELDS: ConfigOption[str] = ConfigOption(
    "fields", "map", None,
    "Per-column options of the `aggregation` merge engine: `fields.<column>.aggregate-function` = "
    + " / ".join(AGGREGATE_FUNCTIONS) + f" (default `{DEFAULT_AGGREGATE}`, as in Paimon); not on a primary-key "
    "column. `-U`/`-D` rows retract from " + ", ".join(RETRACTING) + " (sum subtracts, count counts down, "
    "last_value becomes null) and are refused by a write into a column of another function. count counts the "
    "non-null values written (an integer column). Fixed once the table is created.",
)

ALL_OPTIONS: tuple[ConfigOption[Any], ...] = (
    BUCKET, FILE_FORMAT, FILE_COMPRESSION, WRITE_BUFFER_SIZE, TARGET_FILE_SIZE, COMMIT_MAX_RETRIES,
    COMMIT_TIMEOUT, COMMIT_MIN_RETRY_WAIT, COMMIT_MAX_RETRY_WAIT,
    MANIFEST_MERGE_MIN_COUNT, SNAPSHOT_NUM_RETAINED_MIN, SNAPSHOT_NUM_RETAINED_MAX, SNAPSHOT_TIME_RETAINED,
    CONSUMER_EXPIRATION_TIME,
    PARTITION_EXPIRATION_TIME, PARTITION_EXPIRATION_CHECK_INTERVAL, PARTITION_EXPIRATION_STRATEGY,
    PARTITION_TIMESTAMP_PATTERN, PARTITION_TIMESTAMP_FORMATTER,
    COMPACTION_TRIGGER, STOP_TRIGGER, COMPACTION_MAX_SIZE_AMP, COMPACTION_SIZE_RATIO, WRITE_ONLY,
    COMPACTION_OPTIMIZATION_INTERVAL, ORPHAN_FILES_OLDER_THAN, DELETION_VECTORS,
    TAG_AUTOMATIC_CREATION, TAG_CREATION_PERIOD, TAG_CREATION_DELAY, TAG_NUM_RETAINED_MAX,
    DELTA_METADATA, ICEBERG_METADATA, CHANGE_TRACKING, CHANGELOG_NORMALIZE, SINK_UPSERT_MATERIALIZE, SINK_SHUFFLE_BY_BUCKET, INGEST_SCHEMA_EVOLUTION,
    INGEST_UNAVAILABLE_VALUE, INGEST_TRUNCATE, LOG_SYSTEM, LOG_PROPERTIES, LOG_TOPIC, LOG_RETENTION, LOG_FORMAT, LOG_KEY_FORMAT, LOG_CHANGELOG_MODE,
    LOG_CONSISTENCY, LOG_SCAN, LOG_SCAN_TIMESTAMP, DEBEZIUM_JSON, DEBEZIUM_AVRO, UPSERT_FORMAT,
    UPSERT_MATERIALIZE_STRATEGY, UPSERT_MATERIALIZE_THRESHOLD_HIGH, UPSERT_MATERIALIZE_THRESHOLD_LOW,
    UPSERT_MATERIALIZE_TTL, MERGE_ENGINE, SEQUENCE_FIELD, FIELDS,
)


ALTERABLE: tuple[ConfigOption[Any], ...] = (
    FILE_COMPRESSION, WRITE_BUFFER_SIZE, TARGET_FILE_SIZE, COMMIT_MAX_RETRIES, COMMIT_TIMEOUT, COMMIT_MIN_RETRY_WAIT,
    COMMIT_MAX_RETRY_WAIT, MANIFEST_MERGE_MIN_COUNT, SNAPSHOT_NUM_RETAINED_MIN, SNAPSHOT_NUM_RETAINED_MAX,
    SNAPSHOT_TIME_RETAINED, COMPACTION_TRIGGER, STOP_TRIGGER, COMPACTION_MAX_SIZE_AMP, COMPACTION_SIZE_RATIO,
    CONSUMER_EXPIRATION_TIME,
    PARTITION_EXPIRATION_TIME, PARTITION_EXPIRATION_CHECK_INTERVAL, PARTITION_EXPIRATION_STRATEGY,
    PARTITION_TIMESTAMP_PATTERN, PARTITION_TIMESTAMP_FORMATTER,
    WRITE_ONLY, COMPACTION_OPTIMIZATION_INTERVAL, ORPHAN_FILES_OLDER_THAN, CHANGE_TRACKING, CHANGELOG_NORMALIZE,
    TAG_AUTOMATIC_CREATION, TAG_CREATION_PERIOD, TAG_CREATION_DELAY, TAG_NUM_RETAINED_MAX,
    SINK_UPSERT_MATERIALIZE, SINK_SHUFFLE_BY_BUCKET,
    INGEST_SCHEMA_EVOLUTION, INGEST_UNAVAILABLE_VALUE, INGEST_TRUNCATE, LOG_SCAN,
    LOG_SCAN_TIMESTAMP,
    UPSERT_MATERIALIZE_STRATEGY, UPSERT_MATERIALIZE_THRESHOLD_HIGH, UPSERT_MATERIALIZE_THRESHOLD_LOW,
    UPSERT_MATERIALIZE_TTL,
)
"""Options an existing table may change (ALTER TABLE ... SET/UNSET TBLPROPERTIES): they govern how later writes,
compactions, expirations and readers behave, never how data already written is laid out or found. The others are
fixed at CREATE TABLE: the bucket count and file format (where rows are), the log system, topic, formats and
consistency (what the topic holds)."""


def alter_options(table: str, current: Mapping[str, str], set_options: Mapping[str, str],
                  unset_options: Sequence[str]) -> dict[str, str]:
    """`current` with `set_options` applied and `unset_options` removed (back to their defaults); every key must
    be declared and in ALTERABLE, every value must parse."""
    checked = validate_table_options(set_options)
    for key in [*checked, *unset_options]:
        if find_option(key) is None:
            raise _unknown(key, "table")
        if not any(o.matches(key) for o in ALTERABLE):
            alterable = ", ".join(sorted(o.key for o in ALTERABLE))
            raise InvalidOptionError(f"table {table!r}: option {key!r} is fixed when the table is created and cannot "
                                     f"be changed; options that can change: {alterable}")
    changed = {k: v for k, v in current.items() if k not in set(unset_options)}
    changed.update(checked)
    return changed


def find_option(key: str) -> ConfigOption[Any] | None:
    return next((o for o in ALL_OPTIONS if o.matches(key)), None)


def _unknown(key: str, where: str) -> InvalidOptionError:
    valid = sorted(o.key + (".<name>" if o.type == "map" else "") for o in ALL_OPTIONS)
    close = difflib.get_close_matches(key, [o.key for o in ALL_OPTIONS], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return InvalidOptionError(f"unknown {where} option {key!r}{hint}; valid options: {', '.join(valid)}")


def validate_table_options(options: Mapping[str, str], where: str = "table") -> dict[str, str]:
    """Check every key is declared and every value parses; returns the options as plain strings."""
    out: dict[str, str] = {}
    for key, value in options.items():
        opt = find_option(key)
        if opt is None:
            raise _unknown(key, where)
        value = str(value).lower() if isinstance(value, bool) else str(value)
        if opt.type != "map":
            opt.parse(value)
        out[key] = value
    return out


def session_defaults(session_options: Mapping[str, str]) -> dict[str, str]:
    """Strip the `table-storage.` prefix of session options; any other key is an error."""
    stripped = {}
    for key, value in session_options.items():
        if not key.startswith(SESSION_PREFIX):
            raise InvalidOptionError(
                f"session option {key!r} must start with {SESSION_PREFIX!r} (e.g. 'table-storage.bucket') or be a "
                "catalog option (s3.endpoint, s3.access-key, ...: docs/options.md)"
            )
        stripped[key[len(SESSION_PREFIX):]] = value
    return validate_table_options(stripped, "session")
