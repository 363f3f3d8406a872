"""The worker heap bound: glibc's thresholds are fixed once; other C libraries are left alone."""

import platform
from unittest.mock import patch

import pytest

from transforms import heap


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_thresholds_are_fixed_on_glibc_and_once():
    assert heap.bound_heap_growth() is True
    with patch.object(heap.ctypes, "CDLL", side_effect=AssertionError("called again")):
        assert heap.bound_heap_growth() is True


def test_a_c_library_without_mallopt_is_left_alone():
    with patch.object(heap, "_bounded", False), patch.object(heap.ctypes, "CDLL", side_effect=OSError("no libc")):
        assert heap.bound_heap_growth() is False

    class NoMallopt:
        pass

    with patch.object(heap, "_bounded", False), patch.object(heap.ctypes, "CDLL", return_value=NoMallopt()):
        assert heap.bound_heap_growth() is False


def test_startup_objects_are_frozen_once_and_later_garbage_is_still_collected():
    import gc
    import weakref

    with patch.object(heap, "_frozen", False):
        heap.freeze_startup_heap()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        # A second DoFn's setup freezes nothing more. Checked by the call, not by the count: the
        # count drops whenever a frozen object is freed, which other tests' leftover threads do.
        with patch.object(heap.gc, "freeze", side_effect=AssertionError("frozen again")), \
                patch.object(heap.gc, "collect", side_effect=AssertionError("collected again")):
            heap.freeze_startup_heap()

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle made after the freeze
    ref = weakref.ref(a)
    del a, b
    gc.collect()
    assert ref() is None


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_the_free_heap_is_trimmed_by_one_thread_per_process():
    import threading
    import time

    calls = []
    parked = threading.Event()  # never set: after three calls the fake parks the thread for good

    class Trim:
        argtypes: tuple[object, ...] = ()
        restype: object = None

        def __call__(self, pad: int) -> int:
            calls.append(pad)
            if len(calls) >= 3:
                parked.wait()
            return 1

    class Libc:
        malloc_trim = Trim()

    with patch.object(heap, "_trimming", False), patch.object(heap.ctypes, "CDLL", return_value=Libc()):
        assert heap.trim_heap_periodically(every=0.01) is True
        assert heap.trim_heap_periodically(every=0.01) is True  # a second DoFn's setup: no second thread
        deadline = time.monotonic() + 5
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert calls[:3] == [0, 0, 0]
    trimmers = [t for t in threading.enumerate() if t.name == "fleetgrade-heap-trim"]
    assert trimmers and all(t.daemon for t in trimmers)


def test_a_c_library_without_malloc_trim_starts_nothing():
    with patch.object(heap, "_trimming", False), patch.object(heap.ctypes, "CDLL", side_effect=OSError("no libc")):
        assert heap.trim_heap_periodically() is False


def test_young_collections_are_relaxed_and_cycles_are_still_collected_without_an_explicit_collect():
    import gc
    import weakref

    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 7, 9)
        gc.collect()  # young count back to 0
        heap.relax_young_collections()
        assert gc.get_threshold() == (heap.YOUNG_GC_THRESHOLD, 7, 9)  # older generations unchanged
        heap.relax_young_collections()  # a second DoFn's setup changes nothing
        assert gc.get_threshold() == (heap.YOUNG_GC_THRESHOLD, 7, 9)

        class Node:
            other: object

        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
        kept = [[] for _ in range(heap.YOUNG_GC_THRESHOLD // 2)]  # fewer new containers: no collection yet
        assert ref() is not None
        kept += [[] for _ in range(heap.YOUNG_GC_THRESHOLD)]  # past the threshold: a young collection ran
        assert ref() is None
        del kept
    finally:
        gc.set_threshold(*saved)


def test_arrow_allocates_from_the_system_pool_unless_the_user_chose_one(monkeypatch: pytest.MonkeyPatch):
    import pyarrow as pa

    before = pa.default_memory_pool()
    try:
        pa.set_memory_pool(pa.mimalloc_memory_pool())
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
        assert heap.use_system_arrow_pool() is False
        assert pa.default_memory_pool().backend_name == "mimalloc"
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
        assert heap.use_system_arrow_pool() is True
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(before)
