"""transforms/beamfiles.py ``map_ahead``: stored files read in order, concurrently on an object
store (issue 39: a loop over stored partitions must not wait on one round trip after another)."""

from __future__ import annotations

import threading

from transforms.beamfiles import map_ahead


def test_map_ahead_reads_ahead_on_an_object_store_and_keeps_order():
    # Every read waits until four are in flight at once: reads made one after another never get
    # there, and the barrier's timeout fails the test (no timing is asserted).
    barrier = threading.Barrier(4, timeout=30)
    seen: list[int] = []

    def read(i: int) -> int | None:
        seen.append(i)
        if len(seen) <= 4:
            barrier.wait()
        return None if i == 10 else i * i

    got = list(map_ahead(read, range(11), remote=True, ahead=3))
    assert got == [(i, None if i == 10 else i * i) for i in range(11)]


def test_map_ahead_reads_in_place_when_local():
    caller = threading.get_ident()
    assert list(map_ahead(lambda i: (i, threading.get_ident() == caller), range(3), remote=False)) == [
        (i, (i, True)) for i in range(3)]
