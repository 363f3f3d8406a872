"""The stores runs are read from, at the edge: a local folder (read by the core itself), GCS
through its client (transforms/gcs.py), any other Beam filesystem through ``FileSystems``."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from graders.runs.runfiles import RunFiles
from graders.runs.storage import FETCH_THREADS, Listed, ObjectStore, RunReader, join, run_files, scheme
from transforms.gcs import GcsObjects, gcs_delete, gcs_move, gcs_write, use_emulator_if_configured

# Workers import this module when they unpickle a DoFn, so the hook reaches every process.
use_emulator_if_configured()

__all__ = ["beam_run_files", "delete_file", "delete_files", "join", "map_ahead", "pool", "read_if_exists", "reader_for", "remote", "rename_files",
           "scheme", "store_for", "write_file"]


class BeamObjects:
    """``ObjectStore`` over Beam's ``FileSystems``, for schemes other than gs:// (one listing, no
    generations)."""

    def folders(self, prefix: str) -> tuple[list[Listed], list[str]]:
        return list(self.objects(prefix)), []

    def objects(self, prefix: str) -> Iterator[Listed]:
        prefix = prefix.rstrip("/") + "/"
        fs = FileSystems.get_filesystem(prefix)
        # What FileSystem.match does for a glob (every Beam filesystem implements ``_list``),
        # without collecting the result in a list.
        for meta in fs.match_files(fs._list(prefix), prefix + "**"):
            path: str = meta.path
            if path.startswith(prefix):
                mtime = float(getattr(meta, "last_updated_in_seconds", 0.0) or 0.0)
                yield Listed(path[len(prefix) :], int(meta.size_in_bytes), mtime, None)

    def fetch(self, path: str, generation: int | None, start: int, length: int) -> bytes:
        if not FileSystems.exists(path):
            raise FileNotFoundError(f"{path}: not found")
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            if start:
                fh.seek(start)
            data: bytes = fh.read(length)
        return data

    def read(self, path: str, limit: int) -> tuple[bytes, int | None] | None:
        try:
            return self.fetch(path, None, 0, limit), None
        except FileNotFoundError:
            return None


_stores: dict[str, ObjectStore] = {}
_pool: ThreadPoolExecutor | None = None
_readers: dict[str, RunReader] = {}
_lock = threading.Lock()


def store_for(base: str) -> ObjectStore | None:
    """The object store of ``base``; None for a local folder, which the core reads itself."""
    kind = scheme(base)
    if kind == "":
        return None
    with _lock:
        if kind not in _stores:
            _stores[kind] = GcsObjects() if kind == "gs" else BeamObjects()
        return _stores[kind]


def remote(base: str) -> bool:
    """Whether ``base`` is on an object store (each request a round trip worth overlapping)."""
    return store_for(base) is not None


def reader_for(base: str) -> RunReader | None:
    """The process's reader of ``base``'s store (its pool of fetch threads); None when local."""
    store = store_for(base)
    if store is None:
        return None
    kind = scheme(base)
    with _lock:
        if kind not in _readers:
            _readers[kind] = RunReader(store)
        return _readers[kind]


def pool() -> ThreadPoolExecutor:
    """The process's threads for requests that run ahead of the element being processed."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="fleetgrade-ahead")
        return _pool


def beam_run_files(root: str, listing: Iterable[tuple[Any, ...]]) -> RunFiles:
    """A run at ``root`` whose files (relative path, size[, mtime]) were listed by discovery.

    A local run is read as ``fleetgrade grade`` reads it: regular files only, no link followed
    (``open_regular``); an object store has neither links nor special files.
    """
    return run_files(root, listing, reader_for(root))


# Reads run concurrently ahead of the one a loop is at (``map_ahead``), on an object store.
READS_AHEAD = 8
T = TypeVar("T")
R = TypeVar("R")


def map_ahead(read: Callable[[T], R], items: Iterable[T], remote: bool, ahead: int = READS_AHEAD
              ) -> Iterator[tuple[T, R]]:
    """(item, ``read(item)``) of each item, in order; when ``remote`` (an object store) the next
    ``ahead`` reads run concurrently, so a loop over stored partitions waits on one round trip at
    a time at most (at most ``ahead`` + 1 results are held)."""
    if not remote:
        yield from ((item, read(item)) for item in items)
        return
    held: deque[tuple[T, Future[R]]] = deque()
    for item in items:
        held.append((item, pool().submit(read, item)))
        if len(held) > ahead:
            first, work = held.popleft()
            yield first, work.result()
    while held:
        first, work = held.popleft()
        yield first, work.result()


def write_file(path: str, data: bytes) -> None:
    """Write a whole file: one upload on GCS (Beam's writer takes two, a resumable session)."""
    if scheme(path) == "gs":
        gcs_write(path, data)
        return
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
        fh.write(data)


def rename_files(pairs: list[tuple[str, str]]) -> None:
    """Move each source over its destination: on GCS a copy and a delete per file, the files
    concurrently (Beam's batch requests are not what every GCS endpoint serves)."""
    if pairs and scheme(pairs[0][0]) == "gs":
        list(pool().map(lambda pair: gcs_move(*pair), pairs))
    elif pairs:
        FileSystems.rename([src for src, _ in pairs], [dst for _, dst in pairs])


def delete_files(paths: list[str]) -> None:
    """Delete files (on GCS concurrently; one already gone is no error there)."""
    if paths and scheme(paths[0]) == "gs":
        list(pool().map(gcs_delete, paths))
    elif paths:
        FileSystems.delete(paths)


def delete_file(path: str) -> bool:
    """Delete one file; whether it was there."""
    if scheme(path) == "gs":
        return gcs_delete(path)
    if not FileSystems.exists(path):
        return False
    FileSystems.delete([path])
    return True


def read_if_exists(path: str, limit: int | None = None, of_a_run: bool = False) -> bytes | None:
    """A file's bytes (up to ``limit``), or None when there is no such file: one request on an
    object store (no metadata asked for first). ``of_a_run``: a run's file read before its run
    (its identity), which the run's reading then takes instead of asking again."""
    store = store_for(path)
    if store is not None:
        found = store.read(path, limit or 1 << 40)
        if found is None:
            return None
        reader = reader_for(path)
        if of_a_run and reader is not None:
            reader.remember(path, found[1], found[0])
        return found[0]
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as fh:
        data: bytes = fh.read() if limit is None else fh.read(limit)
    return data
