"""The typed options a table's log store runs with. Declared (key, type, default, doc) and parsed once in
`catalog.options`; the log store only ever sees this frozen value."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping

ChangelogMode = Literal["upsert", "all"]
Consistency = Literal["transactional", "eventual"]
ScanMode = Literal["full", "latest", "from-timestamp"]


@dataclass(frozen=True)
class LogStoreOptions:
    topic: str
    partitions: int
    format: str
    key_format: str
    changelog_mode: ChangelogMode
    consistency: Consistency
    properties: Mapping[str, str] = field(default_factory=dict)
    """Kafka client properties (`log.properties.*`), bootstrap.servers among them."""
    format_options: Mapping[str, str] = field(default_factory=dict)
    retention_ms: int | None = None
    scan: ScanMode = "full"
    scan_timestamp_ms: int | None = None
    request_timeout_s: float = 10.0

    @property
    def bootstrap_servers(self) -> str:
        return self.properties.get("bootstrap.servers", "")
