"""A long-running worker's heap: bounded C heap growth, and no re-scan of its start-up objects.

C heap (make bench memory):

glibc serves big blocks (over 128 KiB) with mmap and returns them on free, but after the first
such block is freed it raises that threshold (up to 32 MiB), so later big blocks (read blocks,
pickled bundles, Parquet buffers) come from the heap, which only shrinks from its top. Over a
10k-run local job that held ~37 MiB more at the peak. Fixing both thresholds (what
``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` do at start-up) turns that adjustment off.
Other C libraries have no ``mallopt``; nothing is changed there.

Freed C heap (make bench memory): glibc gives a freed block back only from the heap's top or
by trimming; the transient buffers of a long local job (gRPC messages, decoded bundles, read
blocks) left free pages inside the heap that its peak then counted. ``malloc_trim(0)`` once a
second, from a daemon thread, gives every free page back: a multi-process worker's peak at 10k
runs 222-228 -> 217-221 MiB, and ~7 MiB less in a runner process whose thresholds were not
fixed; no change at 1k runs.

Arrow's allocations (make bench memory): pyarrow's default pool, its bundled mimalloc, kept the
pages of a partition's decode and encode (~10 MiB after one 2k-row ``grader_results``
partition, ~25 MiB over a job's first partitions) where the system pool, glibc under the
thresholds above, gives them back: a 10k-run local job's peak 208.7 -> 196.7 MiB, and 1k -> 10k
growth +4.5 -> +3.5 MiB, at the same speed. A pool the user chose
(``ARROW_DEFAULT_MEMORY_POOL``) is kept.

Cyclic GC (make bench core): a worker holds ~160k container objects once Beam is imported, and
every full collection walked all of them, ~0.1 s each; a large run's allocations set off one or
two, 10-20% of its grading time. Frozen after set-up, they are left out of every collection.

Young collections (make bench core): a large run builds tens of thousands of containers (tool
calls, their arguments, steps) that all live until the run is graded and then die together by
reference count; with CPython 3.11's first threshold of 700 allocations, each was walked by two
or three young collections first, 7-8% of a large run's time (measured with ``gc.callbacks``).
At 50,000 a run's objects are mostly gone before a collection starts (none ran in the bench's
large runs); cyclic garbage still goes at the next one, and 50,000 containers is a few tens of
MiB at most, whatever the fleet's size.
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
