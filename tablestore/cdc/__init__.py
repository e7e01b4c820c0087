"""Change data capture sources: what a database's change records (Debezium, canal, Maxwell, upsert JSON in Kafka)
say about their table's schema. Decoding them happens in Spark (tablestore.spark.cdc); this package is the
engine-free part: schemas from records and how a table must evolve to take them."""
from tablestore.cdc.schemas import (
    JOB_MAX_OFFSETS_PER_TRIGGER,
    FORMATS,
    KnownSchema,
    CdcSchemaError,
    Evolution,
    RecordSchema,
    Signature,
    debezium_signature,
    evolution,
    known_schema,
    record_schema,
)

__all__ = [
    "CdcSchemaError",
    "Evolution",
    "FORMATS",
    "JOB_MAX_OFFSETS_PER_TRIGGER",
    "KnownSchema",
    "RecordSchema",
    "Signature",
    "debezium_signature",
    "evolution",
    "known_schema",
    "record_schema",
]
