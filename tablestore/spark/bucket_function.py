"""The name of a table's bucket function in the JVM (`tablestore.spark.jvm.mirror.BucketFunction`, the twin of
`filestore.bucket_of`): `tablestore_bucket:<buckets>:<Arrow type>|<Arrow type>...`, the bucket key's Arrow types in
key order as pyarrow prints them (the name does not follow the Java class: the jar reads the prefix from here,
through its generated `Contract`). A Spark catalog that is a `FunctionCatalog` loads the function by this name
(`BucketFunctionCatalog.load(ident)`) and names it in its write's required distribution, so Spark computes each
row's bucket once, in the JVM."""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa

PREFIX = "tablestore_bucket"


def bucket_function_name(key_types: Sequence[pa.DataType], num_buckets: int) -> str:
    """The JVM bucket function of a bucket key of `key_types` (the table's Arrow types) and `num_buckets`."""
    return f"{PREFIX}:{num_buckets}:{'|'.join(str(t) for t in key_types)}"
