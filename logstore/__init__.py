"""The log store: a Kafka topic per table carrying its changes (+I/-U/+U/-D) in an open format.

What other packages may use is listed in `__all__`; they import it from here, never from a submodule."""
from logstore.changes import (
    ADDITION_VALUES,
    ADDITIONS,
    IS_ADDITION,
    RETRACTION_VALUES,
    RETRACTIONS,
    ROW_KIND_COLUMN,
    ROW_KIND_VALUES,
    RowKind,
    addition_mask,
    check_row_kinds,
    insert_kinds,
    row_kinds_of,
)
from logstore import broker
from logstore.errors import (BrokerError, InvalidRowKindError, LogFormatError, LogRecordsExpiredError,
                             LogStoreError)
from logstore.formats.factory import get_format
from logstore.options import LogStoreOptions
from logstore.raw import (KafkaRecord, RawProducer, edge_records, first_record, produce_raw, record_at,
                          recreate_topic, topic_partitions)
from logstore.reader import LOG_OFFSET_COLUMN, LogReader
from logstore.store import LogStore
from logstore.writer import LogWriter

__all__ = [
    "ADDITIONS",
    "ADDITION_VALUES",
    "BrokerError",
    "IS_ADDITION",
    "InvalidRowKindError",
    "KafkaRecord",
    "LOG_OFFSET_COLUMN",
    "LogFormatError",
    "LogReader",
    "LogRecordsExpiredError",
    "LogStore",
    "LogStoreError",
    "LogStoreOptions",
    "LogWriter",
    "RETRACTIONS",
    "RETRACTION_VALUES",
    "ROW_KIND_COLUMN",
    "ROW_KIND_VALUES",
    "RawProducer",
    "RowKind",
    "addition_mask",
    "broker",
    "check_row_kinds",
    "edge_records",
    "first_record",
    "get_format",
    "insert_kinds",
    "produce_raw",
    "record_at",
    "recreate_topic",
    "row_kinds_of",
    "topic_partitions",
]
