"""`LogStore`: one table's topic, its formats, writers and readers."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
from confluent_kafka import KafkaException, TopicPartition

from logstore.formats.avro import AvroSchemaRegistry
from logstore.formats.base import FormatBase, KeyFormat
from logstore.formats.factory import get_format
from logstore.formats.jsonkey import get_key_format
from logstore.errors import LogStoreError
from logstore.kafka import KafkaAdmin, TopicError, group_consumer
from logstore.options import LogStoreOptions
from logstore.reader import LogReader
from logstore.writer import LogWriter


class LogStore:
    def __init__(self, options: LogStoreOptions, schema: pa.Schema, primary_key: Sequence[str], *,
                 history: Callable[[], Sequence[pa.Schema]] | None = None) -> None:
        """`schema`: the table's current schema (what writers encode, what readers decode into); `history`: the
        Arrow schemas of every version of the table, asked when a record of another version needs its writer
        schema (debezium-avro; the JSON formats read a field they lack as null and skip one they do not know)."""
        self.options = options
        self.schema = schema
        self.history = history
        self.primary_key = tuple(primary_key)
        self.admin = KafkaAdmin(options.properties, options.request_timeout_s)
        self.registry = AvroSchemaRegistry()

    @property
    def topic(self) -> str:
        return self.options.topic

    def value_format(self) -> FormatBase:
        return get_format(self.options.format, self.schema, self.primary_key, self.options.format_options,
                          registry=self.registry, history=self.history)

    def key_format(self) -> KeyFormat | None:
        return get_key_format(self.options.key_format, self.schema, self.primary_key)

    def create_topic(self) -> None:
        self.admin.create_topic(self.topic, self.options.partitions, self.options.retention_ms)

    def drop_topic(self) -> None:
        self.admin.delete_topic(self.topic, missing_ok=True)

    def check_topic(self) -> None:
        partitions = self.admin.partitions(self.topic)
        if partitions is None:
            raise TopicError(f"topic {self.topic!r} of the table does not exist on {self.options.bootstrap_servers}")
        if partitions != self.options.partitions:
            raise TopicError(
                f"topic {self.topic!r} has {partitions} partitions, the table has {self.options.partitions} buckets"
            )

    def new_writer(self, transactional_id: str | None = None) -> LogWriter:
        return LogWriter(self.options, self.value_format(), self.key_format(), transactional_id)

    def marker(self, group: str, partition: int) -> tuple[int, str] | None:
        """The (offset, metadata) consumer group `group` last committed for `partition` (LogWriter.mark), or
        None."""
        consumer = group_consumer(self.options.properties, group)
        try:
            found = consumer.committed([TopicPartition(self.topic, partition)], timeout=self.options.request_timeout_s)
        except KafkaException as e:
            raise LogStoreError(f"topic {self.topic!r}: reading group {group!r}'s marker failed: {e}") from None
        if not found or found[0].offset < 0:
            return None
        return found[0].offset, found[0].metadata or ""

    def new_reader(self) -> LogReader:
        return LogReader(self.options, self.value_format())
