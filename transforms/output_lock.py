"""One writer per output folder, and staging that never outlives its job.

``fleetgrade run`` and ``regrade`` rewrite partitions of an output in place; two at once deleted
each other's staging and died half-committed. A job therefore holds ``<output>/_lock.json``, a
JSON object naming its owner (job id, host, pid, start time) and an expiry that a heartbeat
renews while the job runs. The lock is created only if absent and replaced only if unchanged
since it was read (compare-and-swap): under a ``flock`` of the output folder on local disks,
with generation preconditions on GCS. A lock whose owner is gone (its expiry passed, or its
process is dead on this machine) is taken over; a live one refuses the second writer.

Each job stages under ``<output>/_staging/<job>/`` beside an ``_owner.json`` naming it. The job
removes its own staging when it ends, however it ends (a full disk included), and the lock
holder removes the staging of jobs that are gone. The commit checks that its job still holds
the lock before it moves anything (:func:`check_holder`).

No Beam here: the launcher takes the lock before any pipeline exists.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from schemas.tables import SPECS

LOCK_NAME = "_lock.json"
STAGING = "_staging"
OWNER_NAME = "_owner.json"  # in each job's staging folder
TTL_ENV = "FLEETGRADE_LOCK_TTL"  # seconds a lock lives without renewal
DEFAULT_TTL = 600.0  # generous: the pid check frees a dead local job's lock at once
LOCKED_EXIT = 75  # EX_TEMPFAIL: another job holds the output, try again later
MAX_RECORD = 1 << 16  # bytes of a lock or owner record read at most (a record is a few hundred)
LOG = logging.getLogger("fleetgrade")

Clock = Callable[[], float]
Version = int | bytes  # GCS object generation; on local disks, the bytes read


class OutputError(Exception):
    """The output cannot be written by this job; ``str`` is the one-line reason."""

    exit_code = 1


class OutputLocked(OutputError):
    exit_code = LOCKED_EXIT


class LockLost(OutputError):
    """Raised at commit when another job took the lock over (this job's expired)."""


class OutputFull(OutputError):
    pass


class OutputLink(OutputError):
    """A symbolic link inside a local output: writing or deleting through it would reach outside."""


def refuse_links(output: str, paths: Iterable[str] = ()) -> None:
    """OutputLink unless the output's own entries (the lock, staging, state, each table's
    folder) and ``paths`` (files the commit moves or deletes) stay inside the output folder once
    every link is resolved. A job removes the staging of jobs that are gone and rewrites and
    deletes partitions: a ``_staging`` linked to another folder had it empty that folder. Local
    disks only (object stores have no links)."""
    if "://" in output:
        return
    inside = os.path.realpath(output).rstrip("/") + "/"
    own = [os.path.join(output, name) for name in (LOCK_NAME, STAGING, *SPECS)]
    for path in [*own, *paths]:
        real = os.path.realpath(path)
        if os.path.islink(path) or not real.startswith(inside):
            raise OutputLink(f"{path} leads to {real}: fleetgrade follows no symbolic link inside its output, "
                             "where it writes and deletes; remove the link")


def _iso(t: float) -> str:
    return datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _machine() -> str:
    """This kernel and pid namespace: a pid means the same process only where both match."""
    try:
        ns = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        ns = ""
    return f"{_read_text('/proc/sys/kernel/random/boot_id')}/{ns}"


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of a process, from /proc; None without /proc."""
    text = _read_text(f"/proc/{pid}/stat")
    if ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def process_alive(pid: int, start: int | None) -> bool:
    """Whether ``pid`` is still the process that took the lock (not a zombie, not reused)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    stat = _proc_stat(pid)
    if stat is None:
        return True
    state, started = stat
    return state not in ("Z", "X") and (start is None or started == start)


@dataclass(frozen=True)
class Owner:
    """Who holds a lock (or owns a staging folder), and until when without renewal."""

    job: str
    command: str
    host: str
    machine: str
    pid: int
    pid_start: int | None
    started: float
    expires: float

    @classmethod
    def current(cls, job: str, command: str, now: float, ttl: float) -> Owner:
        pid = os.getpid()
        stat = _proc_stat(pid)
        return cls(job, command, socket.gethostname(), _machine(), pid, stat[1] if stat else None,
                   now, now + ttl)

    def encode(self) -> bytes:
        doc = {"job": self.job, "command": self.command, "host": self.host, "machine": self.machine,
               "pid": self.pid, "pid_start": self.pid_start, "started": _iso(self.started),
               "expires": _iso(self.expires)}
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"

    @classmethod
    def decode(cls, data: bytes) -> Owner:
        """Raises ValueError on anything but a lock this module wrote."""
        try:
            doc = orjson.loads(data)
            start = doc["pid_start"]
            return cls(str(doc["job"]), str(doc["command"]), str(doc["host"]), str(doc["machine"]),
                       int(doc["pid"]), None if start is None else int(start), _epoch(doc["started"]),
                       _epoch(doc["expires"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a lock record: {exc}") from None

    def describe(self) -> str:
        return f"{self.command} job {self.job} (pid {self.pid} on {self.host})"


def gone_reason(owner: Owner, now: float, alive: Callable[[int, int | None], bool] = process_alive) -> str | None:
    """Why ``owner`` no longer holds what it claims, or None while it may still be running."""
    if now >= owner.expires:
        return f"its expiry {_iso(owner.expires)} has passed"
    if owner.host == socket.gethostname() and owner.machine == _machine() and not alive(owner.pid, owner.pid_start):
        return f"process {owner.pid} on {owner.host} is gone"
    return None


class Store(Protocol):
    """Where an output's lock and staging live: a local folder or a ``gs://`` prefix."""

    def read(self, rel: str) -> tuple[bytes, Version] | None: ...
    def create(self, rel: str, data: bytes) -> Version | None: ...
    def replace(self, rel: str, data: bytes, expected: Version) -> Version | None: ...
    def delete(self, rel: str, expected: Version) -> bool: ...
    def put(self, rel: str, data: bytes) -> None: ...
    def staged_jobs(self) -> list[str]: ...
    def remove_staging(self, job: str) -> None: ...


class LocalStore:
    """Compare-and-swap on a local (or NFS) folder: every change of the lock file happens under
    an exclusive ``flock`` of the folder, so a read and the write that depends on it are one step."""

    def __init__(self, root: str) -> None:
        self.root = root

    def _path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as exc:  # a filesystem without flock: O_EXCL still makes creation atomic
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
            yield
        finally:
            os.close(fd)  # releases the flock

    def _get(self, rel: str) -> bytes | None:
        """A record's bytes; a FIFO, a device, a folder or a link where a record goes reads as
        b"" (no record: a lock taken over) and is never opened for reading (a FIFO blocked the
        job), and a record is read to ``MAX_RECORD`` bytes at most (a huge file is none either)."""
        try:
            fd = os.open(self._path(rel), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symbolic link
                return b""
            raise
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return b""
            data: bytes = fh.read(MAX_RECORD + 1)
            return data

    def read(self, rel: str) -> tuple[bytes, Version] | None:
        if not os.path.isdir(self.root):
            return None
        with self._guard():
            data = self._get(rel)
        return None if data is None else (data, data)

    def create(self, rel: str, data: bytes) -> Version | None:
        os.makedirs(self.root, exist_ok=True)
        with self._guard():
            try:
                fd = os.open(self._path(rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return None
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        return data

    def _write(self, rel: str, data: bytes) -> None:
        """Whole or not at all: a temporary file renamed over ``rel``."""
        path = self._path(rel)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def replace(self, rel: str, data: bytes, expected: Version) -> Version | None:
        with self._guard():
            if self._get(rel) != expected:
                return None
            self._write(rel, data)
        return data

    def delete(self, rel: str, expected: Version) -> bool:
        with self._guard():
            if self._get(rel) != expected:
                return False
            os.unlink(self._path(rel))
        return True

    def put(self, rel: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(self._path(rel)), exist_ok=True)
        self._write(rel, data)

    def staged_jobs(self) -> list[str]:
        try:
            return sorted(os.listdir(self._path(STAGING)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def remove_staging(self, job: str) -> None:
        path = self._path(f"{STAGING}/{job}")
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.unlink(path)
        try:
            os.rmdir(self._path(STAGING))  # only once no job stages here
        except OSError:
            pass


class GcsStore:
    """Compare-and-swap on GCS with generation preconditions (``ifGenerationMatch``): 0 creates
    only if absent, a generation replaces or deletes only that version."""

    def __init__(self, url: str) -> None:
        bucket, _, prefix = url.removeprefix("gs://").partition("/")
        self.bucket_name = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self._bucket: Any = None

    @property
    def bucket(self) -> Any:
        if self._bucket is None:
            from google.cloud import storage  # type: ignore[attr-defined]

            if os.environ.get("STORAGE_EMULATOR_HOST"):
                from google.auth.credentials import AnonymousCredentials

                client = storage.Client(credentials=AnonymousCredentials(), project="fleetgrade")
            else:
                client = storage.Client()
            self._bucket = client.bucket(self.bucket_name)
        return self._bucket

    def _name(self, rel: str) -> str:
        return self.prefix + rel

    def read(self, rel: str) -> tuple[bytes, Version] | None:
        from google.api_core.exceptions import NotFound

        for _ in range(5):  # replaced between the metadata and the download: read again
            blob = self.bucket.get_blob(self._name(rel))
            if blob is None:
                return None
            try:
                data: bytes = self.bucket.blob(self._name(rel), generation=blob.generation).download_as_bytes()
            except NotFound:
                continue
            return data, int(blob.generation)
        return None

    def _upload(self, rel: str, data: bytes, generation: int | None) -> Version | None:
        from google.api_core.exceptions import PreconditionFailed

        blob = self.bucket.blob(self._name(rel))
        try:
            blob.upload_from_string(data, content_type="application/json", if_generation_match=generation)
        except PreconditionFailed:
            return None
        return int(blob.generation) if blob.generation is not None else None

    def create(self, rel: str, data: bytes) -> Version | None:
        return self._upload(rel, data, 0)

    def replace(self, rel: str, data: bytes, expected: Version) -> Version | None:
        return self._upload(rel, data, int(expected))

    def delete(self, rel: str, expected: Version) -> bool:
        from google.api_core.exceptions import NotFound, PreconditionFailed

        try:
            self.bucket.blob(self._name(rel)).delete(if_generation_match=int(expected))
        except (NotFound, PreconditionFailed):
            return False
        return True

    def put(self, rel: str, data: bytes) -> None:
        self.bucket.blob(self._name(rel)).upload_from_string(data, content_type="application/json")

    def staged_jobs(self) -> list[str]:
        root = self._name(f"{STAGING}/")
        listing = self.bucket.client.list_blobs(self.bucket_name, prefix=root, delimiter="/")
        names = {b.name[len(root):] for b in listing}  # consumes the pages, filling .prefixes
        names |= {p[len(root):].rstrip("/") for p in listing.prefixes}
        return sorted(n for n in names if n)

    def remove_staging(self, job: str) -> None:
        from google.api_core.exceptions import NotFound

        name = self._name(f"{STAGING}/{job}")
        for blob in self.bucket.client.list_blobs(self.bucket_name, prefix=name + "/"):
            try:
                blob.delete()
            except NotFound:  # removed meanwhile
                pass
        blob = self.bucket.get_blob(name)  # a stray object named like a job folder
        if blob is not None:
            blob.delete()


def store_for(output: str) -> Store:
    output = output.rstrip("/")
    if output.startswith("gs://"):
        return GcsStore(output)
    if "://" in output:
        raise OutputError(f"cannot lock an output of this kind, only local folders and gs:// ({output})")
    return LocalStore(output)


def lock_ttl() -> float:
    text = os.environ.get(TTL_ENV, "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_TTL
    return value if value > 0 else DEFAULT_TTL


def staging_owner(job: str) -> str:
    """The owner record of a job's staging, relative to the output."""
    return f"{STAGING}/{job}/{OWNER_NAME}"


class OutputLock:
    """The lock of one output for one job: acquire, renew, release, and the staging it owns."""

    def __init__(self, output: str, job: str, command: str, ttl: float | None = None,
                 clock: Clock = time.time, alive: Callable[[int, int | None], bool] = process_alive,
                 store: Store | None = None) -> None:
        self.output = output.rstrip("/")
        self.where = f"{self.output}/{LOCK_NAME}"
        self.job, self.command = job, command
        self.ttl = ttl if ttl is not None else lock_ttl()
        self.clock, self.alive = clock, alive
        self.store = store if store is not None else store_for(self.output)
        self.owner = Owner.current(job, command, clock(), self.ttl)
        self.version: Version | None = None  # of the lock as we last wrote it, while we hold it
        self.lost = False

    def _holder(self, data: bytes) -> Owner | None:
        try:
            return Owner.decode(data)
        except ValueError:
            return None

    def acquire(self) -> None:
        """Take the lock, taking over one whose owner is gone; OutputLocked if another job holds it."""
        mine = self.owner.encode()
        holder: Owner | None = None
        for _ in range(8):  # each turn follows a lost compare-and-swap: another job changed the lock
            current = self.store.read(LOCK_NAME)
            if current is None:
                version = self.store.create(LOCK_NAME, mine)
                if version is not None:
                    self.version = version
                    return
                continue
            data, seen = current
            if data == mine:  # our own write, whose answer was lost (a retried request)
                self.version = seen
                return
            holder = self._holder(data)
            reason = "its record is unreadable" if holder is None else gone_reason(holder, self.clock(), self.alive)
            if reason is None:
                assert holder is not None
                raise OutputLocked(f"output is locked by {holder.describe()} since {_iso(holder.started)} "
                                   f"({self.where})")
            version = self.store.replace(LOCK_NAME, mine, seen)
            if version is not None:
                LOG.warning("took over the lock of %s: %s held it and %s", self.output,
                            holder.describe() if holder else "an unknown job", reason)
                self.version = version
                return
        who = holder.describe() if holder else "other jobs"
        raise OutputLocked(f"output is locked by {who}, which keep changing the lock ({self.where})")

    def renew(self) -> bool:
        """Push the expiry out (the heartbeat); False once another job has taken the lock."""
        if self.version is None or self.lost:
            return False
        now = self.clock()
        owner = replace(self.owner, expires=now + self.ttl)
        data = owner.encode()
        version = self.store.replace(LOCK_NAME, data, self.version)
        if version is None:
            current = self.store.read(LOCK_NAME)
            if current is None or current[0] != data:
                self.lost = True
                holder = self._holder(current[0]) if current else None
                LOG.error("the lock of %s was %s: this job will not commit", self.output,
                          f"taken over by {holder.describe()}" if holder else "removed")
                return False
            version = current[1]
        self.owner, self.version = owner, version
        self.store.put(staging_owner(self.job), data)
        return True

    def release(self) -> None:
        version, self.version = self.version, None
        if version is None:  # not acquired, or interrupted (Ctrl-C) between writing the lock and noting it
            current = self.store.read(LOCK_NAME)
            if current is None or current[0] != self.owner.encode():
                return
            version = current[1]
        if not self.store.delete(LOCK_NAME, version) and not self.lost:
            LOG.warning("the lock of %s had changed hands; left as it is", self.output)

    def claim_staging(self) -> None:
        """Record this job as the owner of its staging folder (before anything is staged)."""
        self.store.put(staging_owner(self.job), self.owner.encode())

    def clean_staging(self) -> list[str]:
        """Remove the staging of jobs that are gone (none holds the lock now: we do); returns them."""
        removed = []
        now = self.clock()
        for job in self.store.staged_jobs():
            if job == self.job:
                continue
            record = self.store.read(staging_owner(job))
            owner = self._holder(record[0]) if record else None
            if owner is not None and gone_reason(owner, now, self.alive) is None:
                LOG.info("kept the staging of %s, which is still running", owner.describe())
                continue
            self.store.remove_staging(job)
            removed.append(job)
        if removed:
            LOG.warning("removed the staging of %d job(s) that ended without cleaning up: %s",
                        len(removed), ", ".join(removed))
        return removed

    def drop_staging(self) -> None:
        self.store.remove_staging(self.job)


class _Heartbeat:
    def __init__(self, lock: OutputLock) -> None:
        self.lock = lock
        self.interval = max(0.5, min(60.0, lock.ttl / 5))
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="fleetgrade-lock-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                if not self.lock.renew():
                    return
            except Exception as exc:  # a network hiccup: the next beat tries again
                LOG.warning("could not renew the lock of %s: %s", self.lock.output, exc)

    def __enter__(self) -> _Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()


def _cause(exc: BaseException, match: Callable[[BaseException], bool]) -> BaseException | None:
    """The first exception in ``exc``'s chain that matches (Beam wraps what a step raised)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if match(current):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


@contextmanager
def output_lock(output: str, job: str, command: str) -> Iterator[OutputLock]:
    """Hold ``output``'s lock for ``job`` around a pipeline run.

    On entry: take the lock (OutputLocked if another live job holds it), claim this job's
    staging and remove the staging of jobs that are gone; a heartbeat renews the lock. On exit,
    however the body ended: remove this job's staging and release the lock. A full disk or a
    lock lost at commit leaves the body as an OutputError with a one-line reason.
    """
    refuse_links(output)
    lock = OutputLock(output, job, command)
    try:
        lock.acquire()
    except OSError as exc:
        raise OutputError(f"cannot take the output's lock: {exc.strerror or exc} ({lock.where})") from exc
    except BaseException:  # Ctrl-C while the lock was being written: ours is not left behind
        lock.release()
        raise
    try:
        lock.claim_staging()
        lock.clean_staging()
        with _Heartbeat(lock):
            yield lock
    except Exception as exc:
        lost = _cause(exc, lambda e: isinstance(e, OutputError))  # from the commit (LockLost, OutputLink)
        if lost is not None:
            raise type(lost)(str(lost).split(" [while running", 1)[0]) from exc
        if _cause(exc, _no_space) is not None:
            raise OutputFull(f"no space left on device while writing the output; this job's staging was "
                             f"removed and the previous output stays readable ({lock.output})") from exc
        raise
    finally:
        for what, step in (("remove this job's staging", lock.drop_staging), ("release the lock", lock.release)):
            try:
                step()
            except Exception as exc:  # the lock then lapses at its expiry; the next run removes the staging
                LOG.warning("could not %s of %s: %s", what, lock.output, exc)


def check_holder(output: str, job: str, clock: Clock = time.time) -> None:
    """Before a commit moves anything: LockLost unless ``job`` may write ``output`` now.

    A job started under :func:`output_lock` (its staging has an owner record) must still hold
    the lock; any other (a pipeline built without the command line) must not meet a live lock
    of another job.
    """
    store = store_for(output)
    current = store.read(LOCK_NAME)
    holder = None
    if current is not None:
        try:
            holder = Owner.decode(current[0])
        except ValueError:
            holder = None
    if holder is not None and holder.job == job:
        return
    where = f"{output.rstrip('/')}/{LOCK_NAME}"
    if store.read(staging_owner(job)) is not None:
        state = f"taken over by {holder.describe()}" if holder else "removed"
        raise LockLost(f"this job's lock on the output was {state} before its commit; nothing was committed "
                       f"({where})")
    if holder is not None and gone_reason(holder, clock()) is None:
        raise LockLost(f"output is locked by {holder.describe()} since {_iso(holder.started)} ({where})")
