"""`tablestore service`: one long-running process that keeps every table of a warehouse healthy (issue 50).

    runner.py    the loop: tables discovered, leases taken and renewed (filestore.lease), duties run
    duties.py    per table, each on its own schedule: compaction, snapshot expiry, orphan and partition expiry
    autotag.py   the automatic-tag duty (`tag.automatic-creation`): a tag per period, the oldest deleted
    metrics.py   /metrics in Prometheus' text format, read from the tables at scrape time
    log_offsets.py  the end offsets of the tables' Kafka topics, for /metrics
    server.py    the HTTP server of /metrics (and, next, the status page)
    process.py   the process: foreground, or started / stopped / asked in the background like the broker

docs/operate.md ("The service") is the user's page.
"""
from tablestore.service.duties import DUTIES, DutyError, Intervals, TableDuties
from tablestore.service.runner import Service, ServiceConfig, ServiceError

__all__ = ["DUTIES", "DutyError", "Intervals", "Service", "ServiceConfig", "ServiceError", "TableDuties"]
