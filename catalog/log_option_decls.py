"""The log store's table options (`log.*`, the formats' and the upsert materializer's), declared once; part of
`catalog.options.ALL_OPTIONS`, which re-exports them."""
from __future__ import annotations

from catalog.optiontypes import ConfigOption

LOG_SYSTEM: ConfigOption[str] = ConfigOption(
    "log.system", "enum", None,
    "Log system of the table: `kafka` (a topic per table) or `none` (the file store alone). Default: `kafka` when "
    "the session configures `table-storage.log.properties.bootstrap.servers`, `none` otherwise.",
    choices=("kafka", "none"),
)
LOG_PROPERTIES: ConfigOption[str] = ConfigOption(
    "log.properties", "map", None,
    "Kafka client properties, e.g. `log.properties.bootstrap.servers` = `127.0.0.1:19092`.",
)
LOG_TOPIC: ConfigOption[str] = ConfigOption(
    "log.topic", "string", None,
    "Kafka topic of the table. Default: `<database>.<table>.<unique id>`, chosen when the table is created.",
)
LOG_RETENTION: ConfigOption[int] = ConfigOption(
    "log.retention", "duration", None,
    "How long the topic keeps changes (Kafka `retention.ms`). Default: the Kafka cluster's default.", min=1,
)
LOG_FORMAT: ConfigOption[str] = ConfigOption(
    "log.format", "enum", "debezium-json", "Format of the topic's record values.",
    choices=("debezium-json", "debezium-avro", "upsert"),
)
LOG_KEY_FORMAT: ConfigOption[str] = ConfigOption(
    "log.key.format", "enum", "json", "Format of the record keys (primary-key fields) of tables with a primary key.",
    choices=("json",),
)
LOG_CHANGELOG_MODE: ConfigOption[str] = ConfigOption(
    "log.changelog-mode", "enum", "auto",
    "`all`: every change is stored, UPDATE_BEFORE too (docs/logstore.md). `upsert`: no UPDATE_BEFORE is stored "
    "and readers normalize by key. `auto`: upsert for tables with a primary key, all otherwise.",
    choices=("auto", "upsert", "all"),
)
LOG_CONSISTENCY: ConfigOption[str] = ConfigOption(
    "log.consistency", "enum", "transactional",
    "`transactional`: changes become visible when the file-store snapshot of the same commit is (Spark writes: "
    "right after it, bucket by bucket, produced by the executors), exactly once. "
    "`eventual` (primary-key tables only): no Kafka transactions, visible at once (Spark writes: after the "
    "snapshot); duplicates after a failure are removed by key.",
    choices=("transactional", "eventual"),
)
LOG_SCAN: ConfigOption[str] = ConfigOption(
    "log.scan", "enum", "full",
    "Where reading changes starts: `full` (the latest snapshot, then the log from that snapshot's offsets), "
    "`latest` (new changes only) or `from-timestamp` (`log.scan.timestamp-millis`).",
    choices=("full", "latest", "from-timestamp"),
)
LOG_SCAN_TIMESTAMP: ConfigOption[int] = ConfigOption(
    "log.scan.timestamp-millis", "int", None, "Start timestamp (epoch ms) for `log.scan` = `from-timestamp`.", min=0
)
DEBEZIUM_JSON: ConfigOption[str] = ConfigOption(
    "debezium-json", "map", None,
    "Options of the debezium-json format, as in Flink: `debezium-json.schema-include`, "
    "`debezium-json.ignore-parse-errors`, `debezium-json.timestamp-format.standard`.",
)
DEBEZIUM_AVRO: ConfigOption[str] = ConfigOption(
    "debezium-avro", "map", None,
    "Options of the debezium-avro format: `debezium-avro.ignore-parse-errors`, `debezium-avro.namespace`.",
)
UPSERT_FORMAT: ConfigOption[str] = ConfigOption(
    "upsert", "map", None, "Options of the upsert format: `upsert.ignore-parse-errors`."
)

UPSERT_MATERIALIZE_STRATEGY: ConfigOption[str] = ConfigOption(
    "upsert-materialize.strategy", "enum", "LEGACY",
    "How the upsert materializer keeps each primary key's history: LEGACY (one list, per-key TTL), VALUE "
    "(one list, state-compatible with MAP), MAP (ordered multiset, O(1) per event) or ADAPTIVE "
    "(VALUE until threshold.high entries, MAP until back at threshold.low).",
    choices=("LEGACY", "VALUE", "MAP", "ADAPTIVE"),
)
UPSERT_MATERIALIZE_THRESHOLD_HIGH: ConfigOption[int] = ConfigOption(
    "upsert-materialize.adaptive.threshold.high", "int", None,
    "ADAPTIVE: history size at which a key switches from VALUE to MAP. Unset: 400 on heap-like state backends, "
    "50 otherwise (RocksDB, Spark's state store).", min=1,
)
UPSERT_MATERIALIZE_THRESHOLD_LOW: ConfigOption[int] = ConfigOption(
    "upsert-materialize.adaptive.threshold.low", "int", None,
    "ADAPTIVE: history size at which a key switches back from MAP to VALUE. Unset: 300 on heap-like state "
    "backends, 40 otherwise.", min=0,
)
UPSERT_MATERIALIZE_TTL: ConfigOption[int] = ConfigOption(
    "upsert-materialize.ttl", "duration", None,
    "Time to live of the materializer's history entries; unset or 0 disables expiry. LEGACY expires a key's whole "
    "history TTL after its last write; the other strategies expire single entries from the front of the history.",
    min=0,
)
