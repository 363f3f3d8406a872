"""A long-running worker's heap: bounded C heap growth, and no re-scan of its start-up objects.

Each setting is here because ``make bench`` showed a local job's or a worker's peak, or its
grading time, growing without it; the figures are in docs/performance.md ("What the figures
led to").

- C heap: glibc raises its mmap threshold after the first big block is freed, so later big
  blocks (read blocks, pickled bundles, Parquet buffers) come from a heap that only shrinks from
  its top; both thresholds are fixed, as ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_``
  would at start-up. Other C libraries have no ``mallopt``; nothing is changed there.
- Freed C heap: transient buffers leave free pages inside the heap, which the peak counts;
  ``malloc_trim(0)`` once a second, from a daemon thread, gives them back.
- Arrow's allocations: pyarrow's bundled mimalloc keeps a partition's decode and encode pages;
  the system pool (glibc, under the thresholds above) gives them back. A pool the user chose
  (``ARROW_DEFAULT_MEMORY_POOL``) is kept.
- Cyclic GC: the ~160k containers a worker holds once Beam is imported are frozen after set-up,
  so full collections no longer walk them.
- Young collections: a run's containers live until it is graded and then die together by
  reference count; at a first threshold of 50,000 (CPython 3.11's is 700) they are mostly gone
  before a collection starts. Cyclic garbage still goes at the next one, and 50,000 containers
  is a few tens of MiB at most, whatever the fleet's size.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
import time
from typing import Final

_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
THRESHOLD: Final = 128 * 1024  # glibc's initial mmap threshold
YOUNG_GC_THRESHOLD: Final = 50_000
TRIM_EVERY_S: Final = 1.0
_bounded = False
_trimming = False
_frozen = False


def bound_heap_growth() -> bool:
    """Fix glibc's mmap and trim thresholds for this process; whether they are fixed."""
    global _bounded
    if _bounded or not sys.platform.startswith("linux"):
        return _bounded
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    _bounded = mallopt(_M_MMAP_THRESHOLD, THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, THRESHOLD) == 1
    return _bounded


def trim_heap_periodically(every: float = TRIM_EVERY_S) -> bool:
    """Give this process's free C heap back to the system every ``every`` seconds; whether it is.

    Once per process (a daemon thread; ``malloc_trim`` takes glibc's own locks and ctypes
    releases the GIL around it). Other C libraries have no ``malloc_trim``; nothing is started.
    """
    global _trimming
    if _trimming or not sys.platform.startswith("linux"):
        return _trimming
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int

    def loop() -> None:
        while True:
            time.sleep(every)
            trim(0)

    threading.Thread(target=loop, name="fleetgrade-heap-trim", daemon=True).start()
    _trimming = True
    return True


def use_system_arrow_pool() -> bool:
    """Arrow allocates from the system pool in this process, unless the user chose a pool
    (``ARROW_DEFAULT_MEMORY_POOL``); whether it now does."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return False
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return True


def tune_heap() -> None:
    """A local job's process (the runner, or a worker): bounded heap growth, trimmed free heap,
    Arrow on the system allocator."""
    bound_heap_growth()
    trim_heap_periodically()
    use_system_arrow_pool()


def freeze_startup_heap() -> None:
    """Move the objects alive now (modules, classes, the runner's own) out of the cyclic GC's reach.

    Once per process, after set-up: they live as long as the process, so collecting never frees
    them, and every object made later is collected as usual. Garbage is collected first, so none
    is kept for good; a cycle among the frozen objects that becomes garbage later is kept (the
    price of not re-scanning them), which only in-flight work at this moment could form.
    """
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True


def tune_gc() -> None:
    """A worker's cyclic GC, set up once its start-up is done (``PrepareRun.setup``; the bench's
    plain loop does the same): start-up objects frozen, young collections relaxed."""
    freeze_startup_heap()
    relax_young_collections()


def relax_young_collections() -> None:
    """Start a young collection after ``YOUNG_GC_THRESHOLD`` new containers instead of 700.

    For the process (a worker, or the bench's plain loop); the older generations keep their
    thresholds, relative to the young one's collections.
    """
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, older, oldest)
