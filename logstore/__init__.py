"""The log store: a Kafka topic per table carrying its changes (+I/-U/+U/-D) in an open format."""
from logstore.changes import ROW_KIND_COLUMN, RowKind
from logstore.errors import BrokerError, LogFormatError, LogStoreError

__all__ = ["BrokerError", "LogFormatError", "LogStoreError", "ROW_KIND_COLUMN", "RowKind"]
