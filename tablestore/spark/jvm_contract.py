"""The names the Spark jar's Java code shares with Python, declared once: each is a constant of its Python owner,
and `jar.py` generates the Java class `tablestore.spark.jvm.mirror.Contract` from this list when it compiles the jar,
so the Java sources use `Contract.RAW_PLAN_OPTION` and never spell the value (tests/test_architecture.py refuses a Java
string literal equal to one of these values).

What the names are: the options and session settings by which one side tells the other what to do (the hand-over
files' paths, what a write task holds, the snapshot a row-level write was planned on), the system columns of the
data files and of a changelog, the prefixes of the catalog's options and the bucket functions' name. The key
encoding and the bucket hash, which the jar implements again for speed, are held to golden vectors instead
(tests/data/golden/keys.json, read by the Python and the Java tests)."""
from __future__ import annotations

from collections.abc import Mapping

PACKAGE = "tablestore.spark.jvm.mirror"
"""The Java package of `Contract`: the jar's lowest layer, the JVM twins of Python's rules (package-info.java)."""
JAVA_PATH = PACKAGE.replace(".", "/") + "/Contract.java"
"""Where `jar.py` writes the generated source, under its build folder: the path its package names."""


def jvm_constants() -> Mapping[str, str]:
    """Java constant name -> value, read from each value's Python owner (imported here, when the jar is built)."""
    from catalog import CATALOG_OPTION_PREFIXES, SESSION_PREFIX
    from filestore import SYSTEM_COLUMNS
    from logstore import ROW_KIND_COLUMN
    from tablestore.spark import (bucket_function, compact_job, jvm_write, log_publish, read, s3a, source_options,
                                  write)

    (catalog_prefix,) = CATALOG_OPTION_PREFIXES
    seq, kind, _count = SYSTEM_COLUMNS
    return {
        # columns
        "ROW_KIND": ROW_KIND_COLUMN,                      # logstore/changes.py: a changelog's change kind
        "SEQUENCE_COLUMN": seq,                           # filestore/merge_keys.py: a data file's system columns
        "VALUE_KIND_COLUMN": kind,
        # options of the Python source's scans and writes, set by the JVM
        "RAW_PLAN_OPTION": read.RAW_PLAN_OPTION,          # read.py step 4: the raw-split plan file
        "READ_CHANGES_OPTION": source_options.CHANGES_OPTION,   # a streaming read's changelog schema
        "TASK_BUCKET_OPTION": write.TASK_BUCKET_OPTION,   # write task p holds bucket p
        "PLANNED_SNAPSHOT_OPTION": write.PLANNED_SNAPSHOT_OPTION,   # MERGE/UPDATE: the snapshot read
        "JVM_WRITE_PLAN_OPTION": jvm_write.PLAN_OPTION,   # jvm_write.py: the JVM writer's plan file
        "JVM_WRITER_OPTION": jvm_write.SWITCH,            # a write's switch for the JVM writer
        "LOG_PUBLISH_PLAN_OPTION": log_publish.PLAN_OPTION,   # log_publish.py: the commit's log plans
        "LOG_PUBLISH_READ_OPTION": log_publish.READ_OPTION,   # the read that produces them
        "LOG_PUBLISH_TASKS_KEY": log_publish.TASKS_KEY,   # the plan file's bucket of each task, in order
        "COMPACT_READ_OPTION": compact_job.READ_OPTION,   # compact_job.py: the read whose tasks compact
        "JVM_S3A_OPTION": s3a.JVM_S3A_OPTION,             # s3a.py: the JVM reads and writes S3 itself
        # session settings
        "LOG_PRODUCERS_CONF": log_publish.PRODUCERS_CONF,
        "COMPACTION_RUNNERS_CONF": compact_job.RUNNERS_CONF,
        # option prefixes (catalog/options.py, catalog/fs_options.py)
        "SESSION_PREFIX": SESSION_PREFIX,
        "CATALOG_OPTION_PREFIX": catalog_prefix,
        # function names (bucket_function.py)
        "BUCKET_FUNCTION_PREFIX": bucket_function.PREFIX,
    }


def java_source() -> str:
    """The source of `tablestore.spark.jvm.mirror.Contract` (generated into the jar's build, never committed)."""
    lines = [f"package {PACKAGE};", "",
             "/**",
             " * Python owner: {@code tablestore/spark/jvm_contract.py}. Generated from it when the jar is built: the",
             " * names Python owns.",
             " */",
             "public final class Contract {"]
    for name, value in jvm_constants().items():
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'    public static final String {name} = "{escaped}";')
    lines += ["", "    private Contract() {", "    }", "}", ""]
    return "\n".join(lines)
