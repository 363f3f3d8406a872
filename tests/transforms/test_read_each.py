"""transforms/beamfiles.py ``read_each``: stored files read in order, concurrently on an object
store (issue 39: a loop over stored partitions must not wait on one round trip after another)."""

from __future__ import annotations

import threading

from transforms import beamfiles


def test_read_each_reads_ahead_on_an_object_store_and_keeps_order(monkeypatch):
    # Every read waits until four are in flight at once: reads made one after another never get
    # there, and the barrier's timeout fails the test (no timing is asserted).
    barrier = threading.Barrier(4, timeout=30)
    seen: list[str] = []

    def read(path: str) -> bytes | None:
        seen.append(path)
        if len(seen) <= 4:
            barrier.wait()
        return None if path.endswith("absent") else path.encode()

    monkeypatch.setattr(beamfiles, "read_if_exists", read)
    monkeypatch.setattr(beamfiles, "store_for", lambda path: object() if path.startswith("gs://") else None)
    paths = [f"gs://b/p{i}" for i in range(10)] + ["gs://b/absent"]
    got = list(beamfiles.read_each(paths, ahead=3))
    assert got == [(p, None if p.endswith("absent") else p.encode()) for p in paths]


def test_read_each_reads_a_local_file_in_place(tmp_path):
    (tmp_path / "a").write_bytes(b"x")
    paths = [str(tmp_path / "a"), str(tmp_path / "missing")]
    assert list(beamfiles.read_each(paths)) == [(paths[0], b"x"), (paths[1], None)]
