"""Keep a long-running worker's C heap from growing with the work it has done (make bench memory).

glibc serves big blocks (over 128 KiB) with mmap and returns them on free, but after the first
such block is freed it raises that threshold (up to 32 MiB), so later big blocks (read blocks,
pickled bundles, Parquet buffers) come from the heap, which only shrinks from its top. Over a
10k-run local job that held ~37 MiB more at the peak. Fixing both thresholds (what
``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` do at start-up) turns that adjustment off.
Other C libraries have no ``mallopt``; nothing is changed there.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Final

_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
THRESHOLD: Final = 128 * 1024  # glibc's initial mmap threshold
_bounded = False


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
