"""Where Spark's own output goes: a quiet console, the stacks in a log file.

By default Spark prints its log (WARN and above: a failed task's 27-48-line JVM stack, "Using Spark's default
log4j profile", the native-hadoop warning) and the JVM prints "Using incubator modules" on stderr, none of which
a user of tablestore asked for: our errors are one line. A session this process starts (`tablestore.spark.session`,
every CLI command) writes all of it to a log file instead:

- log4j2 writes Spark's log (WARN and above, every failed task's and statement's stack) to the file
  (`log_config`), nothing to the console;
- the JVM's own stderr (and so its Python workers') is appended to the same file.

The file is `<cache>/logs/spark.log` (`TABLESTORE_CACHE_DIR`, default ~/.cache/tablestore), shared by every
session of the machine and appended to (rolled over at 64 MB, two kept); `tablestore sql` writes `logs/sql.log` beside it. `TABLESTORE_SPARK_LOG=console`
(the CLI's `--spark-log-level` sets it) keeps Spark's console output as Spark has it.
A session that already runs when tablestore is asked for one (PySpark's own `pyspark` shell starts one) keeps its
console: start the shell with `--driver-java-options -Dlog4j2.configurationFile=<log_config()[0]>` to quiet it.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

from tablestore.spark.jar import cache_dir

LOG_ENV = "TABLESTORE_SPARK_LOG"
"""`console`: Spark's output on the console, as Spark prints it; anything else (or unset): the log file."""

_LOG_CONFIG = """# written by tablestore (tablestore/spark/logs.py): Spark's log (WARN and above, every stack) in the file only
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {log}
appender.file.filePattern = {log}.%i
appender.file.append = true
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 64MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c: %m%n%ex
logger.sqldriver.name = org.apache.spark.sql.hive.thriftserver.SparkSQLDriver
logger.sqldriver.level = debug
"""


def log_config(name: str = "spark") -> tuple[Path, Path]:
    """(a log4j2 configuration writing Spark's log to a file only, that file): `<cache>/<name>-log4j2.properties`
    and `<cache>/logs/<name>.log` (`sql`: `tablestore sql`'s, whose failed statements' stacks spark-sql logs at
    DEBUG)."""
    directory = cache_dir()
    log = directory / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    config = directory / f"{name}-log4j2.properties"
    text = _LOG_CONFIG.format(log=log)
    if not config.exists() or config.read_text() != text:
        tmp = config.with_name(f".{config.name}.{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(config)   # another process starting a session reads a whole file
    return config, log


def quiet_wanted() -> bool:
    """Whether a session started now sends Spark's output to the log file: unless `TABLESTORE_SPARK_LOG=console`."""
    return os.environ.get(LOG_ENV, "") != "console"


def quiet_python() -> None:
    """PySpark's own Python warnings a user did not ask for (pandas 3's FutureWarning at every import of
    pyspark.pandas' checks) are not shown."""
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)


def launch_quiet_gateway(settings: dict[str, str]) -> Path | None:
    """Start the JVM of the session about to be built with `settings` (the builder's, `spark.master` included)
    writing its log and stderr to the log file, and return that file; None (nothing done) when a JVM already runs
    in this process: its console is the one it has."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:   # type: ignore[attr-defined]  # PySpark's own process-wide gateway
        return None
    config, log = log_config()
    options = settings.get("spark.driver.extraJavaOptions", "")
    settings["spark.driver.extraJavaOptions"] = f"{options} -Dlog4j2.configurationFile={config}".strip()
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    with open(log, "ab") as stderr:   # the JVM keeps its own descriptor of it
        gateway = launch_gateway(conf, popen_kwargs={"stderr": stderr})
    SparkContext._ensure_initialized(gateway=gateway)   # type: ignore[attr-defined]  # the builder uses it
    return log


def active_log() -> Path | None:
    """The log file of this process's session when tablestore started it quiet, else None."""
    return _ACTIVE[0]


_ACTIVE: list[Path | None] = [None]


def set_active(log: Path | None) -> None:
    if log is not None:
        _ACTIVE[0] = log
