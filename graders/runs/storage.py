"""Listing and reading runs, wherever they are stored: the one home of both (docs/architecture.md,
"Discover" and "Read").

A fleet is listed as a stream of entries ``(path relative to the listed folder, size, mtime)``,
grouped into runs as it passes (``FleetRuns``); one run is listed again for reading
(``list_run``) and read through ``RunFiles`` (graders/runs/runfiles.py). A local folder is
walked and opened here (``walk_local``, ``open_regular``); an object store is an
``ObjectStore`` that the edge provides (transforms/gcs.py, transforms/beamfiles.py), so this
module imports neither Beam nor a cloud client.

On an object store every request is a round trip, so this module overlaps them: the workflow
folders of a fleet are listed concurrently (``walk_objects``), and ``RunReader`` lists the next
runs and fetches their files with a bounded pool of threads while the current one is graded,
holding at most ``PREFETCH_BYTES`` of fetched bytes not yet read. Each file is one request: the
listing gives its size and generation, so no metadata is asked for.
"""

from __future__ import annotations

import io
import itertools
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple, Protocol

from graders.runs import runfiles
from graders.runs.layout import RUN_DIR, artifact_top, run_root_of, session_root_of
from graders.runs.runfiles import (
    MAX_RUN_SECONDS,
    NOT_UTF8,
    UNREADABLE_DIR,
    RunFiles,
    RunOverBudget,
    bounded_listing,
    listing_mtimes,
    listing_sizes,
    local_listing_files,
    shown_name,
    skipped_warnings,
    utf8_name,
    walk_local,
)

Entry = tuple[str, int, float]  # (path relative to the listed folder, size, mtime seconds)
RunListing = tuple[str, list[Entry]]  # (run root relative to the input, its sorted entries)

# Bytes fetched ahead and not yet read, over every run a reader has in flight; a file's first
# FETCH_CHUNK bytes are fetched ahead, the rest (a file larger than that) as it is read.
PREFETCH_BYTES = 64 << 20
FETCH_CHUNK = 8 << 20
PREFETCH_RUNS = 8  # runs listed and fetched ahead of the one being read
# Objects read whole before their run is (a run's aw_info.json, read for its identity), kept for
# the run's reading at the same generation: at most this many bytes, the oldest dropped first.
REMEMBER_BYTES = 16 << 20
FETCH_THREADS = 16  # requests in flight at once, per reader
LIST_AHEAD = 4  # folders of a fleet listed ahead of the one being grouped


class Listed(NamedTuple):
    """An object store's entry: an ``Entry`` plus the generation it was listed at."""

    rel: str
    size: int
    mtime: float
    generation: int | None


class StorageError(OSError):
    """An object that could not be listed or read, after retries."""


class ObjectStore(Protocol):
    """What listing and reading need of an object store (``gs://``): transforms/ implements it.

    Paths are full URLs (``gs://bucket/name``); a prefix names a folder (a ``/`` is added where
    it has none) and ``rel`` in what is listed is relative to it. Every method is one request per call (a page per item of ``objects``),
    retried on the store's transient errors, and raises ``StorageError`` once retries are over.
    """

    def folders(self, prefix: str) -> tuple[list[Listed], list[str]]:
        """The objects right below ``prefix`` (ending in ``/``) and its sub-prefixes, by name."""
        ...

    def objects(self, prefix: str) -> Iterator[Listed]:
        """Every object below ``prefix``, by name, a page at a time."""
        ...

    def fetch(self, path: str, generation: int | None, start: int, length: int) -> bytes:
        """Up to ``length`` bytes of the object from ``start``, as it was at ``generation``
        (the current one when None); ``FileNotFoundError`` when there is none."""
        ...

    def read(self, path: str, limit: int) -> tuple[bytes, int | None] | None:
        """Up to ``limit`` bytes of the object as it is now, with its generation; None when absent."""
        ...


def scheme(base: str) -> str:
    head, sep, _ = base.partition("://")
    return head if sep else ""


def join(base: str, rel: str) -> str:
    return base.rstrip("/") + "/" + rel if rel else base


def _path_order(rel: str) -> list[str]:
    return rel.split("/")


def _name_order(rel: str) -> str:
    return rel


# The order in which a store lists: by path component in the local walk (each folder's
# entries by name, depth first), by name on an object store. Listed in order, every folder's
# files come in one stretch, so a run's listing is complete once the walk has passed its folder.
def listing_order(base: str) -> Callable[[str], Any]:
    return _path_order if scheme(base) == "" else _name_order


# -- listing -----------------------------------------------------------------------------------


def walk_objects(store: ObjectStore, base: str, ahead: int = LIST_AHEAD) -> Iterator[Listed]:
    """Every object below ``base``, by name, as one listing; the folders right below ``base``
    (a fleet's workflows) are listed concurrently, ``ahead`` at a time beside the one being
    consumed, each holding at most a few pages.

    Names below one sub-prefix sort together, and sub-prefixes sort as their objects do (they
    all end in ``/``), so the folders' listings in prefix order, with the top's own objects
    merged in, are in name order.
    """
    prefix = base.rstrip("/") + "/"
    top, subs = store.folders(prefix)
    streams: list[tuple[str, Callable[[], Iterator[Listed]]]] = [
        (item.rel, lambda item=item: iter((item,))) for item in top  # type: ignore[misc]
    ]
    streams += [(sub, lambda sub=sub: _under(store, prefix, sub)) for sub in subs]  # type: ignore[misc]
    streams.sort(key=lambda s: s[0])
    yield from _ahead(streams, ahead)


def _under(store: ObjectStore, prefix: str, sub: str) -> Iterator[Listed]:
    """A folder's objects; once its listing fails after retries, the folder as one that cannot
    be read (as the local walk lists one): its run is listed again when read, and a second
    failure is its dead letter, naming the folder and the error, while the fleet goes on."""
    try:
        for item in store.objects(prefix + sub):
            yield item._replace(rel=sub + item.rel)
    except StorageError:
        yield Listed(sub + ".", UNREADABLE_DIR, 0.0, None)


_DONE = object()


def _ahead(streams: list[tuple[str, Callable[[], Iterator[Listed]]]], ahead: int) -> Iterator[Listed]:
    """The streams' items in stream order, the next ``ahead`` streams read by threads into
    bounded queues meanwhile (a stream that fails raises where its items would have come)."""
    if ahead <= 0 or len(streams) <= 1:
        for _, make in streams:
            yield from make()
        return
    stop = threading.Event()

    def pump(make: Callable[[], Iterator[Listed]], out: queue.Queue[Any]) -> None:
        try:
            for item in make():
                while not stop.is_set():
                    try:
                        out.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            out.put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            out.put(exc)

    started: deque[queue.Queue[Any]] = deque()
    pending = iter(streams)
    with ThreadPoolExecutor(ahead + 1, thread_name_prefix="fleetgrade-list") as pool:
        try:
            while True:
                while len(started) <= ahead:
                    nxt = next(pending, None)
                    if nxt is None:
                        break
                    q: queue.Queue[Any] = queue.Queue(maxsize=3000)  # a few pages of one folder
                    pool.submit(pump, nxt[1], q)
                    started.append(q)
                if not started:
                    return
                q = started.popleft()
                while (item := q.get()) is not _DONE:
                    if isinstance(item, BaseException):
                        raise item
                    yield item
        finally:
            stop.set()


def entries(base: str, store: ObjectStore | None) -> Iterator[Entry]:
    """(path relative to ``base``, size, mtime) of every file below ``base``, in listing order.

    A local folder is walked with one ``stat`` a file (``walk_local``: entries that are not read
    come as negative sizes); an object store is listed with ``walk_objects``."""
    if store is None:
        return walk_local(base)
    return (e[:3] for e in walk_objects(store, base))  # type: ignore[misc]


def _in_run(root_rel: str, rel: str) -> bool:
    """Whether a file of the folder at ``root_rel`` is the run's, not a nested run folder's."""
    if not root_rel:  # the input itself is the run
        return belongs_to_base(rel) is not False
    return run_root_of(root_rel + "/" + rel) == root_rel


def _in_session_group(root_rel: str, rel: str) -> bool:
    """Whether a file of the folder at ``root_rel`` is one of its session files (graders/formats)."""
    full = f"{root_rel}/{rel}" if root_rel else rel
    return run_root_of(full) is None and session_root_of(full) == root_rel


def _gh_aw_file(root_rel: str, rel: str) -> bool:
    """Whether a file of the folder at ``root_rel`` makes it a gh-aw run (an artifact name at its top)."""
    if not root_rel:
        return belongs_to_base(rel) is True
    return run_root_of(f"{root_rel}/{rel}") == root_rel


def belongs_to_base(rel: str) -> bool | None:
    """Whether a file (relative to ``--input``) says the input is one run's folder: True for a
    gh-aw artifact name at its top, not within a nested run folder; False for a file of a run
    folder below; None for a file that says neither (a README)."""
    parts = rel.split("/")
    if artifact_top(parts) and not any(RUN_DIR.match(p) for p in parts[1:-1]):
        return True
    return False if run_root_of(rel) is not None else None


def list_run_entries(base: str, root_rel: str, listed: Callable[[str], Iterable[tuple[Any, ...]]]) -> list[Any]:
    """The sorted listing of one run folder, as ``FleetRuns`` groups it within the fleet: a
    gh-aw run's files, or else, for a folder holding no gh-aw run, its session files.
    ``listed(path)`` lists a folder (entries, or ``Listed`` items kept whole)."""
    def own(belongs: Callable[[str, str], bool]) -> list[Any]:
        return sorted(itertools.islice(
            # "." is the folder itself, which could not be read; a run folder's nested in it is not its
            (e for e in listed(join(base, root_rel)) if e[0] == "." or belongs(root_rel, e[0])),
            # One entry past the run's budget is enough to refuse it (runfiles.bounded_listing).
            runfiles.MAX_RUN_FILES + 1,
        ))

    found = own(_in_run)
    if not any(e[0] != "." and _gh_aw_file(root_rel, e[0]) for e in found):
        # No gh-aw run here: the folder's session files, as discovery grouped them (if any).
        found = own(_in_session_group) or found
    if not found and scheme(base) == "" and _shown_not_utf8(join(base, root_rel)):
        found = [(".", NOT_UTF8, 0.0)]  # a folder discovery did not enter for its name
    return found


def list_run(base: str, root_rel: str, store: ObjectStore | None) -> list[Entry]:
    """``list_run_entries`` as (path, size, mtime) entries: what the state records."""
    if store is None:
        return list_run_entries(base, root_rel, walk_local)
    return [e[:3] for e in list_run_entries(base, root_rel, store.objects)]


def _shown_not_utf8(path: str) -> bool:
    """Whether ``path`` is how a folder whose name is not UTF-8 is shown (``shown_name``)."""
    parent, _, leaf = path.rpartition("/")
    try:
        names = os.listdir(parent or ".")
    except OSError:
        return False
    return any(not utf8_name(name) and shown_name(name) == leaf for name in names)


def hint_path(base: str, root_rel: str) -> str:
    """The path whose folders name a run's workflow and date (layout_hints): its root relative
    to the input, or, for an input that is one run folder, the input's own last folders."""
    if root_rel:
        return root_rel
    path = base.split("://", 1)[1].split("/", 1)[-1] if scheme(base) else base  # no gs://bucket
    return "/".join([p for p in path.split("/") if p][-3:])


@dataclass
class FleetRuns:
    """A fleet's listing → one (run root, sorted listing) per run folder, as the listing streams by.

    Files are grouped where they are listed: a run is yielded as soon as the listing has passed
    its folder, so only the runs being listed are held; the order is checked as the files come
    (a file out of order could split a run in two), which needs no memory of the runs already
    yielded. ``files`` and ``stray`` count what was listed.
    """

    base: str
    files: int = 0
    stray: int = 0

    def runs(self, listing: Iterator[Entry]) -> Iterator[RunListing]:
        """The runs of a fleet; or, when ``base`` is itself one run's folder (the first of its
        files that tells says so), that run (root ``""``), never its own subfolders
        (``mcp-logs/``, ``sandbox/``) as runs."""
        head: list[Entry] = []  # the files before the first that tells (READMEs)
        own = None
        for entry in listing:
            head.append(entry)
            own = belongs_to_base(entry[0])
            if own is not None:
                break
        if own:
            own_files = (e for e in itertools.chain(head, listing) if _in_run("", e[0]))
            # One entry past the run's budget is enough to refuse it (runfiles.bounded_listing).
            found = sorted(itertools.islice(own_files, runfiles.MAX_RUN_FILES + 1))
            self.files += len(found)
            yield "", found
            return
        yield from self._fleet(itertools.chain(head, listing))

    def _fleet(self, listing: Iterator[Entry]) -> Iterator[RunListing]:
        order = listing_order(self.base)
        open_runs: dict[str, list[Entry]] = {}
        sessions: set[str] = set()  # open roots that are session groups, not gh-aw runs
        last: str | None = None
        last_key: Any = None
        for rel, size, mtime in listing:
            self.files += 1
            if size >= 0:  # an entry not read is shown, not sorted, by its name
                key = order(rel)
                if last_key is not None and key <= last_key:
                    raise RuntimeError(f"listing of {self.base} is not in order at {rel}: a run's files could be split")
                last_key = key
            root = run_root_of(rel)
            if root is None and size < 0 and rel.endswith("/."):
                # A folder outside any known run that cannot be entered may hold runs: it is
                # listed as a run of its own, which becomes a dead letter saying why.
                root, rel = rel[:-2], rel
            session = False
            if root is None:
                # A file outside every gh-aw run may be an agent session or trace of another
                # format: grouped by folder (layout.session_root_of), unless it sits in an open
                # gh-aw run's folder (a stray of that run, as before).
                root = session_root_of(rel)
                session = root is not None and not any(
                    rel.startswith(r + "/") for r in open_runs if r not in sessions)
                root = root if session else None
            if root is None:
                self.stray += 1
                continue
            if session:
                sessions.add(root)
            elif root in sessions:  # the folder is a gh-aw run after all: its session files were strays
                sessions.discard(root)
                kept = [e for e in open_runs.get(root, []) if run_root_of(f"{root}/{e[0]}") == root]
                self.stray += len(open_runs.get(root, [])) - len(kept)
                open_runs[root] = kept
            if root != last:
                # The input's own folder ("") holds its session files until the end.
                for ended in [r for r in open_runs if r and not rel.startswith(r + "/")]:
                    sessions.discard(ended)
                    yield ended, sorted(open_runs.pop(ended))
            last = root
            run = open_runs.setdefault(root, [])
            # A run is held up to one entry past its budget, which refuses it (bounded_listing).
            if len(run) <= runfiles.MAX_RUN_FILES:
                run.append((rel[len(root) + 1 :] if root else rel, size, mtime))
        for root in list(open_runs):
            yield root, sorted(open_runs.pop(root))


# -- reading -----------------------------------------------------------------------------------


class _Chunks(io.RawIOBase):
    """An object read from its fetched head on, the rest a request per ``FETCH_CHUNK`` as read."""

    def __init__(self, store: ObjectStore, path: str, generation: int | None, head: bytes, asked: int) -> None:
        self.store, self.path, self.generation = store, path, generation
        self.buf, self.pos = head, 0
        self.offset = len(head)  # where the next request starts
        self.eof = len(head) < asked  # the head asked one byte past the listed size, when it could

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.pos >= len(self.buf):
            if self.eof:
                return 0
            self.buf = self.store.fetch(self.path, self.generation, self.offset, FETCH_CHUNK)
            self.pos, self.offset = 0, self.offset + len(self.buf)
            self.eof = len(self.buf) < FETCH_CHUNK
            if not self.buf:
                return 0
        n = min(len(b), len(self.buf) - self.pos)
        b[:n] = self.buf[self.pos : self.pos + n]
        self.pos += n
        return n


def _asked(size: int) -> int:
    """Bytes a file's head asks for: one past its listed size (so that its end is known without
    another request), or its first chunk."""
    return min(size + 1, FETCH_CHUNK)


@dataclass
class _Run:
    """One run in a reader: its listing, then its files' heads, fetched ahead."""

    root: str
    base: str
    root_rel: str
    listing: Future[list[Listed]] = field(default_factory=Future)
    heads: dict[str, Future[bytes]] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)  # bytes each head holds in the budget
    current: bool = False  # being read now: its fetches never wait for room
    released: bool = False


class RunReader:
    """Lists runs of an object store and fetches their files ahead, while earlier runs are read.

    ``submit(base, root_rel)`` queues a run: the pool lists it, then fetches the head of each of
    its files (the whole file up to ``FETCH_CHUNK``) in one request at the listed generation,
    holding at most ``budget`` bytes of heads over the runs in flight (a fetch that does not fit
    waits, without a thread, until a run is released; the run being read never waits). A head
    is kept until its run is released: preprocessing reads some files twice.
    ``listing(base, root_rel)`` makes the run the current one and gives its listing; ``files``
    its ``RunFiles``; ``release`` drops what it did not read.
    """

    def __init__(self, store: ObjectStore, threads: int = FETCH_THREADS, budget: int = PREFETCH_BYTES) -> None:
        self.store = store
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="fleetgrade-fetch")
        self.limit = budget
        self.held = 0
        self.waiting: deque[tuple[_Run, Listed, Future[bytes]]] = deque()
        self.runs: dict[str, _Run] = {}
        self.lock = threading.Lock()
        self.remembered: dict[tuple[str, int], bytes] = {}  # insertion order: the oldest first
        self.remembered_bytes = 0

    def remember(self, path: str, generation: int | None, data: bytes) -> None:
        """An object read whole elsewhere: a run's reading at this generation takes it from here."""
        if generation is None or len(data) >= FETCH_CHUNK:
            return
        with self.lock:
            self.remembered[(path, generation)] = data
            self.remembered_bytes += len(data)
            while self.remembered_bytes > REMEMBER_BYTES:
                oldest = next(iter(self.remembered))
                self.remembered_bytes -= len(self.remembered.pop(oldest))

    def _recalled(self, path: str, generation: int | None, asked: int) -> bytes | None:
        """A remembered object's bytes, taken (called with the lock held)."""
        if generation is None:
            return None
        data = self.remembered.pop((path, generation), None)
        if data is not None:
            self.remembered_bytes -= len(data)
            return data[:asked]
        return None

    def close(self) -> None:
        for root in list(self.runs):
            self.release(root)
        self.pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, base: str, root_rel: str) -> None:
        root = join(base, root_rel)
        with self.lock:
            if root in self.runs:
                return
            run = self.runs[root] = _Run(root, base, root_rel)
        self.pool.submit(self._list, run, run.listing)

    def _list(self, run: _Run, listed: Future[list[Listed]]) -> None:
        if not listed.set_running_or_notify_cancel():  # listed by the reader itself meanwhile
            return
        try:
            found = list_run_entries(run.base, run.root_rel, self.store.objects)
            runfiles.check_file_count(run.root, len(found))
        except BaseException as exc:
            listed.set_exception(exc)
            return
        with self.lock:
            for item in found:  # a head per file, in listing order
                if item.size >= 0 and not run.released:
                    fut: Future[bytes] = Future()
                    run.heads[item.rel] = fut
                    self.waiting.append((run, item, fut))
            self._pump()
        listed.set_result(found)

    def _pump(self) -> None:
        """Start the waiting fetches that fit in the budget, in order; the current run's always
        (called with the lock held)."""
        for entry in [e for e in self.waiting if e[0].current or e[0].released]:
            self.waiting.remove(entry)
            self._start(*entry)
        while self.waiting:
            item = self.waiting[0][1]
            if self.held and self.held + _asked(item.size) > self.limit:
                return
            self._start(*self.waiting.popleft())

    def _start(self, run: _Run, item: Listed, fut: Future[bytes]) -> None:
        if run.released:
            fut.cancel()
            return
        known = self._recalled(join(run.root, item.rel), item.generation, _asked(item.size))
        if known is not None:  # read whole at this generation before: no request
            fut.set_running_or_notify_cancel()
            fut.set_result(known)
            return
        asked = _asked(item.size)
        self.held += asked
        run.held[item.rel] = asked
        self.pool.submit(self._fetch, run, item, fut, asked)

    def _fetch(self, run: _Run, item: Listed, fut: Future[bytes], asked: int) -> None:
        if run.released or not fut.set_running_or_notify_cancel():
            self._give(run, item.rel)
            return
        try:
            fut.set_result(self._head(join(run.root, item.rel), item.generation, asked))
        except BaseException as exc:
            self._give(run, item.rel)
            fut.set_exception(exc)

    def _head(self, path: str, generation: int | None, asked: int) -> bytes:
        try:
            return self.store.fetch(path, generation, 0, asked)
        except FileNotFoundError:
            if generation is None:
                raise
            # Replaced since it was listed: read as it is now (the next listing sees the change).
            return self.store.fetch(path, None, 0, asked)

    def _give(self, run: _Run, rel: str) -> None:
        with self.lock:
            self.held -= run.held.pop(rel, 0)
            self._pump()

    def listing(self, base: str, root_rel: str) -> list[Listed]:
        """The run's listing, once listed (by the reader now, if the pool has not started it);
        from now on its fetches never wait for room."""
        self.submit(base, root_rel)
        run = self.runs[join(base, root_rel)]
        with self.lock:
            run.current = True
            self._pump()
        if run.listing.cancel():  # still queued behind other runs' work: list it here
            run.listing = Future()
            self._list(run, run.listing)
        return run.listing.result()

    def files(self, root: str, listing: list[Any]) -> RunFiles:
        """The run's files, read from the fetched heads (a listing of another origin, without
        generations, is read as it is now)."""
        run = self.runs.get(root)
        sizes = listing_sizes(listing)
        generations = {e[0]: (e[3] if len(e) > 3 else None) for e in listing}

        def opener(rel: str) -> AbstractContextManager[IO[bytes]]:
            return self._open(run, root, rel, sizes.get(rel, 0), generations.get(rel))

        return RunFiles(root, sizes, opener, skipped_warnings(root, listing), listing_mtimes(listing))

    def _open(self, run: _Run | None, root: str, rel: str, size: int,
              generation: int | None) -> AbstractContextManager[IO[bytes]]:
        asked = _asked(size)
        fut = run.heads.get(rel) if run is not None else None
        if fut is None or fut.cancel():  # never fetched ahead, or not started yet: fetched here
            head = self._head(join(root, rel), generation, asked)
            if run is not None:  # kept for a second reading of the file, as a fetched head is
                done: Future[bytes] = Future()
                done.set_result(head)
                run.heads[rel] = done
        else:
            try:  # no longer than the run's time budget (RunFiles.check_time says it once read)
                head = fut.result(timeout=MAX_RUN_SECONDS)
            except FutureTimeout as exc:
                raise RunOverBudget(f"{root}: {rel} could not be fetched within {MAX_RUN_SECONDS:g} s; "
                                    "not graded") from exc
        return io.BufferedReader(_Chunks(self.store, join(root, rel), generation, head, asked), runfiles.READ_BLOCK)

    def release(self, root: str) -> None:
        """Drop a run: its heads not read give their bytes back, its waiting fetches are skipped."""
        with self.lock:
            run = self.runs.pop(root, None)
            if run is None:
                return
            run.released = True
            for fut in run.heads.values():
                fut.cancel()
            self.held -= sum(run.held.values())
            run.held.clear()
            self._pump()


def run_files(root: str, listing: Iterable[tuple[Any, ...]], reader: RunReader | None) -> RunFiles:
    """A run at ``root`` whose files (relative path, size[, mtime[, generation]]) were listed: a
    local one read as ``fleetgrade grade`` reads it (regular files only, no link followed), an
    object store's through ``reader``."""
    found = bounded_listing(root, listing)
    if reader is None:
        return local_listing_files(root, found)
    return reader.files(root, found)


__all__ = ["FleetRuns", "Listed", "ObjectStore", "RunReader", "StorageError", "entries",
           "hint_path", "join", "list_run", "list_run_entries", "run_files", "walk_objects"]
