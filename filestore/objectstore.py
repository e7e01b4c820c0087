"""Object stores under the file store: how an `s3://` warehouse is reached and how a file is created exclusively
on it without a lock service.

A snapshot is published by an exclusive create (filestore.snapshot). On a local disk that is a hard link; on S3 it
is a conditional put (`PUT` with `If-None-Match: *`): of two writers putting the same key, the store accepts the
first and answers the second `412 Precondition Failed`. AWS S3 honours it since 2024, as do S3-compatible stores
such as SeaweedFS and MinIO; a store that ignores the header would let two commits both "win" the same snapshot
id, so `check_conditional_writes` proves the store honours it before a catalog uses it (catalog.Catalog does, once
per bucket and process) and `ConditionalWriteUnsupportedError` refuses it otherwise.

The settings (`S3Settings`) are declared as catalog options in catalog.fs_options (`s3.endpoint`,
`s3.access-key`, ...: Paimon's names); what is not set comes from the standard AWS environment variables and
credential chain (botocore's).
"""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import fsspec

from filestore.errors import ConditionalWriteUnsupportedError, FileStoreError

S3_PROTOCOLS = ("s3", "s3a", "s3n")
"""URL schemes served by S3 (Hadoop's `s3a://` names the same bucket and key as `s3://`)."""


@dataclass(frozen=True)
class S3Settings:
    """How to reach S3; None leaves a setting to the AWS environment variables and credential chain."""

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    region: str | None = None
    path_style_access: bool | None = None

    def storage_options(self) -> dict[str, Any]:
        """Keyword arguments of s3fs.S3FileSystem. Directory listings are never cached: snapshots and manifests
        written by other processes must be seen at the next listing."""
        options: dict[str, Any] = {"use_listings_cache": False}
        if self.endpoint:
            options["endpoint_url"] = self.endpoint
        if self.access_key:
            options["key"] = self.access_key
        if self.secret_key:
            options["secret"] = self.secret_key
        if self.session_token:
            options["token"] = self.session_token
        if self.region:
            options["client_kwargs"] = {"region_name": self.region}
        if self.path_style_access is not None:
            options["config_kwargs"] = {"s3": {"addressing_style": "path" if self.path_style_access else "virtual"}}
        return options


def is_s3(url: str) -> bool:
    """Whether `url` names an object on S3 (`s3://`, `s3a://`, `s3n://`)."""
    return url.split("://", 1)[0].lower() in S3_PROTOCOLS if "://" in url else False


def s3_filesystem(settings: S3Settings) -> fsspec.AbstractFileSystem:
    try:
        import s3fs
    except ImportError as exc:  # pragma: no cover - the `s3` extra is part of every install we test
        raise FileStoreError("an s3:// warehouse needs s3fs: pip install 'tablestore[s3]'") from exc
    return s3fs.S3FileSystem(**settings.storage_options())


def _error_code(exc: BaseException) -> str | None:
    """The S3 error code behind an exception s3fs raised (it translates botocore's ClientError, kept as cause)."""
    for e in (exc, exc.__cause__, exc.__context__):
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            return str(code) if code is not None else None
    return None


_CONFLICT_RETRIES = 20


def put_if_absent(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> bool:
    """Create `path` with `data` unless it exists: True when this call created it, False when it existed.

    S3 answers 412 when the key exists and 409 (`ConditionalRequestConflict`) while another conditional put of the
    same key is in flight: the latter is retried until one of them has landed."""
    bucket, key, _ = fs.split_path(path)  # type: ignore[attr-defined]
    for attempt in range(_CONFLICT_RETRIES):
        try:
            fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")  # type: ignore[attr-defined]
            return True
        except (OSError, ValueError) as exc:
            code = _error_code(exc)
            if code in ("PreconditionFailed", "412"):
                return False
            if code in ("ConditionalRequestConflict", "409") and attempt + 1 < _CONFLICT_RETRIES:
                time.sleep(0.01 * (attempt + 1))
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover


_checked: set[tuple[str, str]] = set()
_checked_lock = threading.Lock()


def check_conditional_writes(fs: fsspec.AbstractFileSystem, root: str, endpoint: str | None) -> None:
    """Prove that the store under `root` refuses a second exclusive create of one key (once per endpoint and bucket
    in a process): put a probe key twice, expect the second to be refused, delete it. A store that accepts both is
    refused with ConditionalWriteUnsupportedError; commits on it could lose one another's snapshots."""
    bucket = root.split("/", 1)[0]
    cache_key = (endpoint or "aws", bucket)
    with _checked_lock:
        if cache_key in _checked:
            return
    probe = f"{root.rstrip('/')}/_conditional-write-probe-{uuid.uuid4().hex}"
    try:
        first = put_if_absent(fs, probe, b"1")
        second = put_if_absent(fs, probe, b"2")
    finally:
        try:
            fs.rm_file(probe)
        except FileNotFoundError:
            pass
    if not (first and not second):
        raise ConditionalWriteUnsupportedError(
            f"the object store at {endpoint or 'AWS S3'} (bucket {bucket!r}) does not honour conditional writes "
            "(a second PUT with If-None-Match: * of one key succeeded): tablestore publishes snapshots with them and "
            "cannot commit safely there without a lock; use a store that supports them (AWS S3, SeaweedFS, MinIO)"
        )
    with _checked_lock:
        _checked.add(cache_key)
