"""Google Cloud Storage at the edge: the credentials, looked up once, and the object store the
listing and reading core uses (graders/runs/storage.py ``ObjectStore``).

Credentials are looked up once per process, up front, without retries: Application Default
Credentials, or anonymous against an emulator (``STORAGE_EMULATOR_HOST``). Beam's own lookup
(retried with back-off, and logged with a traceback per try) is settled with the same answer, so
Beam never looks again. A missing one is ``NoCredentials``, whose message says how to provide one.

``GcsObjects`` makes one request per call: a listing page of up to 1,000 objects, or one ranged
download at the listed generation (no metadata request before it). Transient errors (429,
5xx, dropped connections) are retried with exponential back-off for ``RETRY_SECONDS``; after
that the call raises ``StorageError`` naming the object and the last error.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from graders.runs.storage import Listed, StorageError

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
# How long one call retries a transient error (a test sets it lower; GCS's own guidance is
# exponential back-off from 1 s, for up to a minute or two).
RETRY_ENV = "FLEETGRADE_GCS_RETRY_SECONDS"
PAGE_SIZE = 1000  # the most a GCS listing page holds
POOL_SIZE = 64  # connections kept to the store: every fetch thread of every reader of a process

_lock = threading.Lock()
_credentials: dict[str | None, tuple[Any, str | None]] = {}  # by emulator (None: GCS itself)
_clients: dict[str | None, Any] = {}


class NoCredentials(RuntimeError):
    """No Google credentials were found for gs://."""


HOW_TO_AUTHENTICATE = (
    "no Google credentials found for gs://: run `gcloud auth application-default login`, set "
    "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or set STORAGE_EMULATOR_HOST "
    "to use an emulator")


def credentials() -> tuple[Any, str | None]:
    """(credentials, project) for gs://, looked up once per process; Beam's lookup settled too."""
    emulator = os.environ.get(EMULATOR_ENV) or None
    with _lock:
        if emulator not in _credentials:
            _credentials[emulator] = _lookup()
            _settle_beam(_credentials[emulator][0])
        return _credentials[emulator]


def _lookup() -> tuple[Any, str | None]:
    if os.environ.get(EMULATOR_ENV):
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials(), "fleetgrade"
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    # google-auth logs each metadata-server probe it makes; a failed lookup is said in one line.
    auth_log = logging.getLogger("google.auth")
    level = auth_log.level
    auth_log.setLevel(logging.ERROR)
    try:
        creds, project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError as exc:
        key = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        if key:  # a key file named but missing or unusable: say which and why
            said = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
            reason = (said.strip().rstrip(".").splitlines() or [type(exc).__name__])[0][:300]
            raise NoCredentials(f"GOOGLE_APPLICATION_CREDENTIALS cannot be used for gs:// ({reason}): "
                                + HOW_TO_AUTHENTICATE.split(": ", 1)[1]) from exc
        raise NoCredentials(HOW_TO_AUTHENTICATE) from exc
    finally:
        auth_log.setLevel(level)
    return creds, project


def _settle_beam(creds: Any) -> None:
    """Beam caches its credential lookup in these attributes (apache_beam/internal/gcp/auth.py):
    set, Beam connects with ours (anonymously for an emulator) and never retries a lookup."""
    try:
        from apache_beam.internal.gcp import auth
    except ImportError:  # pragma: no cover - apache-beam[gcp] is a dependency
        return
    from google.auth.credentials import AnonymousCredentials

    cached = _settled_beam_value(auth, creds, AnonymousCredentials)
    with auth._Credentials._credentials_lock:
        auth._Credentials._credentials = cached
        auth._Credentials._credentials_init = True


def _settled_beam_value(auth: Any, creds: Any, anonymous: type) -> Any:
    return None if isinstance(creds, anonymous) else auth._ApitoolsCredentialsAdapter(creds)


def use_emulator_if_configured() -> bool:
    """Against an emulator, settle Beam's lookup to anonymous at once (workers call this as they
    import the module: there are no credentials to find there either)."""
    if not os.environ.get(EMULATOR_ENV):
        return False
    credentials()
    return True


def client() -> Any:
    """The process's storage client, its connection pool sized for concurrent fetches."""
    creds, project = credentials()
    emulator = os.environ.get(EMULATOR_ENV) or None
    with _lock:
        if emulator not in _clients:
            import requests
            from google.auth.transport.requests import AuthorizedSession
            from google.cloud import storage  # type: ignore[attr-defined]

            session = AuthorizedSession(creds)
            adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=POOL_SIZE)
            session.mount("https://", adapter)
            session.mount("http://", adapter)
            _clients[emulator] = storage.Client(project=project or "fleetgrade", credentials=creds, _http=session)
        return _clients[emulator]


def _retry() -> Any:
    from google.cloud.storage.retry import DEFAULT_RETRY

    seconds = _retry_seconds()
    return DEFAULT_RETRY.with_delay(initial=min(1.0, seconds / 8), maximum=min(32.0, seconds / 2)).with_timeout(seconds)


def _retry_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get(RETRY_ENV) or 120.0))
    except ValueError:
        return 120.0


def split(path: str) -> tuple[str, str]:
    """(bucket, object name) of ``gs://bucket/name``."""
    bucket, _, name = path.removeprefix("gs://").partition("/")
    return bucket, name


def _seconds(updated: Any) -> float:
    """An object's update time as Beam's listing gives it (gcsio ``_updated_to_seconds``), so
    a listing's digest (the incremental state) is the same as before."""
    return time.mktime(updated.timetuple()) - time.timezone + updated.microsecond / 1000000.0


def _failed(what: str, exc: BaseException) -> OSError:
    from google.api_core import exceptions

    if isinstance(exc, exceptions.NotFound):
        return FileNotFoundError(f"{what}: not found")
    retried = isinstance(exc, exceptions.RetryError)
    cause = exc.cause if isinstance(exc, exceptions.RetryError) and exc.cause is not None else exc
    status = getattr(cause, "code", None) or getattr(getattr(cause, "response", None), "status_code", None)
    text = f"HTTP {int(status)}" if isinstance(status, int) else (str(cause).strip().splitlines() or [
        type(cause).__name__])[0][:300]
    if retried:
        return StorageError(f"{what}: still failing after retrying for {_retry_seconds():g} s ({text})")
    return StorageError(f"{what}: cannot be read ({text})")


class GcsObjects:
    """``ObjectStore`` over google-cloud-storage: one request per call, retried (module doc)."""

    def _list(self, prefix: str, delimiter: str | None) -> Any:
        bucket, name = split(prefix)  # a folder: its trailing / keeps run-1/ apart from run-10/
        return client().list_blobs(bucket, prefix=name, delimiter=delimiter, page_size=PAGE_SIZE,
                                   retry=_retry())

    @staticmethod
    def _listed(blob: Any, strip: int) -> Listed:
        return Listed(blob.name[strip:], int(blob.size or 0), _seconds(blob.updated), blob.generation)

    def folders(self, prefix: str) -> tuple[list[Listed], list[str]]:
        prefix = prefix.rstrip("/") + "/"
        strip = len(split(prefix)[1])
        try:
            pages = self._list(prefix, "/")
            top = [self._listed(b, strip) for b in pages]  # reads every page, filling prefixes
            subs = sorted(p[strip:] for p in pages.prefixes)
        except Exception as exc:
            raise _failed(prefix, exc) from exc
        return top, subs

    def objects(self, prefix: str) -> Iterator[Listed]:
        prefix = prefix.rstrip("/") + "/"
        strip = len(split(prefix)[1])
        pages = self._list(prefix, None)
        try:
            for blob in pages:
                yield self._listed(blob, strip)
        except Exception as exc:
            raise _failed(prefix, exc) from exc

    def fetch(self, path: str, generation: int | None, start: int, length: int) -> bytes:
        from google.api_core import exceptions

        bucket, name = split(path)
        blob = client().bucket(bucket).blob(name, generation=generation)
        try:
            data: bytes = blob.download_as_bytes(start=start, end=start + length - 1, raw_download=True,
                                                 checksum=None, retry=_retry())
        except exceptions.RequestRangeNotSatisfiable:  # at or past the end (an empty object)
            return b""
        except Exception as exc:
            raise _failed(path, exc) from exc
        return data

    def read(self, path: str, limit: int) -> tuple[bytes, int | None] | None:
        bucket, name = split(path)
        blob = client().bucket(bucket).blob(name)
        try:
            data: bytes = blob.download_as_bytes(start=0, end=limit - 1, raw_download=True, checksum=None,
                                                 retry=_retry())
        except Exception as exc:
            failed = _failed(path, exc)
            if isinstance(failed, FileNotFoundError):
                return None
            raise failed from exc
        # The download's headers name the generation it read (x-goog-generation).
        return data, int(blob.generation) if blob.generation is not None else None


def _blob(path: str) -> Any:
    bucket, name = split(path)
    return client().bucket(bucket).blob(name)


def gcs_write(path: str, data: bytes) -> None:
    """One upload (retried: a staged or partition file is whole or absent, whoever wrote it)."""
    _blob(path).upload_from_string(data, content_type="application/octet-stream", retry=_retry())


def gcs_move(src: str, dst: str) -> None:
    """``src`` copied over ``dst`` (an atomic replace of one object), then deleted."""
    from google.api_core import exceptions

    source = _blob(src)
    bucket, name = split(dst)
    try:
        source.bucket.copy_blob(source, client().bucket(bucket), name, retry=_retry())
    except exceptions.NotFound:  # moved by an earlier attempt of this commit
        if _blob(dst).exists(retry=_retry()):
            return
        raise
    gcs_delete(src)


def gcs_delete(path: str) -> bool:
    """Delete an object; whether it was there."""
    from google.api_core import exceptions

    try:
        _blob(path).delete(retry=_retry())
    except exceptions.NotFound:
        return False
    return True
