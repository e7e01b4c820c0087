"""Catalog options: how the warehouse's file system is reached (declared once here, documented in docs/options.md).

They are the catalog's, not a table's: `tablestore.Catalog(warehouse, options={"s3.endpoint": ...})`, the Spark
catalog's `spark.sql.catalog.<name>.s3.endpoint`, the CLI's `--option s3.endpoint=...`. Paimon's names. A process
started for a Spark session (its executors' Python workers, the catalog service) gets them in the environment
variable `TABLESTORE_CATALOG_OPTIONS` (a JSON object, set by `tablestore.spark.session`); options given to the
catalog win over it. What neither sets comes from the standard AWS environment variables (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL`, `AWS_REGION`, ...) and credential chain.
"""
from __future__ import annotations

import json
import os
from typing import Mapping

from catalog.errors import InvalidOptionError
from catalog.optiontypes import ConfigOption
from filestore import S3Settings

S3_ENDPOINT: ConfigOption[str] = ConfigOption(
    "s3.endpoint", "string", None,
    "Endpoint URL of an S3-compatible store (e.g. `http://127.0.0.1:8333`); unset: AWS S3 (or `AWS_ENDPOINT_URL`).",
)
S3_ACCESS_KEY: ConfigOption[str] = ConfigOption(
    "s3.access-key", "string", None, "Access key id; unset: the AWS environment variables and credential chain.",
)
S3_SECRET_KEY: ConfigOption[str] = ConfigOption(
    "s3.secret-key", "string", None, "Secret access key; unset: the AWS environment variables and credential chain.",
)
S3_SESSION_TOKEN: ConfigOption[str] = ConfigOption(
    "s3.session-token", "string", None, "Session token of temporary credentials.",
)
S3_REGION: ConfigOption[str] = ConfigOption(
    "s3.region", "string", None, "Region of the bucket; unset: `AWS_REGION` or the AWS configuration.",
)
S3_PATH_STYLE_ACCESS: ConfigOption[bool] = ConfigOption(
    "s3.path.style.access", "boolean", None,
    "Address buckets in the path (`http://host/bucket/key`) instead of the host name; most S3-compatible stores "
    "on one host need `true`.",
)

CATALOG_OPTIONS: tuple[ConfigOption[object], ...] = (
    S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY, S3_SESSION_TOKEN, S3_REGION, S3_PATH_STYLE_ACCESS,  # type: ignore[assignment]
)
CATALOG_OPTION_PREFIXES = ("s3.",)
"""Keys with these prefixes are catalog options; the others given to a catalog are table defaults or errors."""


CATALOG_OPTIONS_ENV = "TABLESTORE_CATALOG_OPTIONS"


def is_catalog_option(key: str) -> bool:
    return key.startswith(CATALOG_OPTION_PREFIXES)


def environment_catalog_options() -> dict[str, str]:
    """The catalog options of `TABLESTORE_CATALOG_OPTIONS` (a JSON object); {} when unset."""
    text = os.environ.get(CATALOG_OPTIONS_ENV)
    if not text:
        return {}
    try:
        given = json.loads(text)
    except ValueError as exc:
        raise InvalidOptionError(f"environment variable {CATALOG_OPTIONS_ENV} is not a JSON object: {exc}") from None
    if not isinstance(given, dict):
        raise InvalidOptionError(f"environment variable {CATALOG_OPTIONS_ENV} is not a JSON object")
    return {str(k): str(v) for k, v in given.items()}


def s3_settings(options: Mapping[str, str]) -> S3Settings:
    """The S3 settings of a catalog's options; an unknown `s3.` key or a bad value is an InvalidOptionError."""
    known = {o.key: o for o in CATALOG_OPTIONS}
    for key in options:
        if key not in known:
            raise InvalidOptionError(
                f"unknown catalog option {key!r}; the catalog's options are {', '.join(sorted(known))}"
            )

    def get(option: ConfigOption[object]) -> object:
        value = options.get(option.key)
        return None if value is None else option.parse(str(value))

    return S3Settings(
        endpoint=get(S3_ENDPOINT),  # type: ignore[arg-type]
        access_key=get(S3_ACCESS_KEY),  # type: ignore[arg-type]
        secret_key=get(S3_SECRET_KEY),  # type: ignore[arg-type]
        session_token=get(S3_SESSION_TOKEN),  # type: ignore[arg-type]
        region=get(S3_REGION),  # type: ignore[arg-type]
        path_style_access=get(S3_PATH_STYLE_ACCESS),  # type: ignore[arg-type]
    )
