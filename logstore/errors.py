"""The closed set of errors the log store raises. Each carries the topic, partition, offset or log file concerned."""
from __future__ import annotations


def _restore(cls: type, args: tuple, state: dict) -> BaseException:  # type: ignore[type-arg]
    """Unpickle an error without calling its `__init__` (whose arguments differ from `args`)."""
    error: BaseException = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class LogStoreError(Exception):
    """Root of every error the log store raises."""

    def __reduce__(self) -> tuple[object, ...]:
        """Errors cross process boundaries (Spark workers, writer processes) intact, whatever their `__init__`."""
        return (_restore, (type(self), self.args, self.__dict__))


class BrokerError(LogStoreError):
    """The project's own Kafka broker could not be fetched, started, stopped or reached."""


class BrokerToolMissingError(BrokerError):
    """`java` (17+) or `mvn` is not on PATH, so the broker cannot be fetched or run."""

    def __init__(self, tool: str, hint: str) -> None:
        super().__init__(f"{tool!r} not found on PATH: {hint}")
        self.tool = tool


class BrokerStartError(BrokerError):
    """The broker process exited or did not become ready in time; the message ends with its log tail."""

    def __init__(self, reason: str, log_file: str | None, log_tail: str) -> None:
        detail = f"\n--- last lines of {log_file or 'its output'} ---\n{log_tail}" if log_tail else ""
        super().__init__(f"kafka broker did not come up: {reason}{detail}")
        self.log_file = log_file
        self.log_tail = log_tail


class LogFormatError(LogStoreError):
    """A message could not be encoded or decoded; names the topic, partition and offset when the caller gave them."""

    def __init__(
        self,
        reason: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = ""
        if topic is not None or partition is not None or offset is not None:
            where = f" (topic={topic!r}, partition={partition}, offset={offset})"
        super().__init__(f"{reason}{where}")
        self.reason = reason
        self.topic = topic
        self.partition = partition
        self.offset = offset


class InvalidRowKindError(LogFormatError):
    """A `_row_kind` column holds something other than +I, -U, +U, -D (a bad value, a null, or a non-string
    column). Names the table when known, the distinct bad values (`kinds`) and how many rows hold them (`count`)."""

    def __init__(self, reason: str, *, table: str | None = None, kinds: list[object] | None = None,
                 count: int = 0) -> None:
        where = f"table {table!r}: " if table else ""
        super().__init__(f"{where}{reason}")
        self.detail = reason
        self.table = table
        self.kinds = kinds or []
        self.count = count


class LogRecordsExpiredError(LogStoreError):
    """Records a reader needs are gone from the topic (Kafka's retention, `log.retention`, deleted them)."""

    def __init__(self, topic: str, partition: int, offset: int, log_start: int) -> None:
        super().__init__(f"topic {topic!r} partition {partition}: the records from offset {offset} are needed but "
                         f"the topic now starts at offset {log_start} (deleted by its retention, log.retention)")
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.log_start = log_start
