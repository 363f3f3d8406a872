"""graders/runs/storage.py over an in-memory object store: name order, one request per file,
the byte budget of what is fetched ahead, reads past the first chunk, and failures."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from graders.runs import storage
from graders.runs.runfiles import UNREADABLE_DIR
from graders.runs.storage import FleetRuns, Listed, RunReader, StorageError, list_run, run_files, walk_objects


class MemoryStore:
    """Objects by name (``bkt/...``), each with a generation; every call counted."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects_ = {name: (data, i + 1) for i, (name, data) in enumerate(sorted(objects.items()))}
        self.calls: Counter[str] = Counter()
        self.fetched: Counter[str] = Counter()
        self.fail: set[str] = set()
        self.lock = threading.Lock()

    def _names(self, prefix: str) -> list[str]:
        name = prefix.removeprefix("gs://")
        return [n for n in sorted(self.objects_) if n.startswith(name)]

    def folders(self, prefix: str) -> tuple[list[Listed], list[str]]:
        self.calls["folders"] += 1
        prefix = prefix.rstrip("/") + "/"
        strip = len(prefix.removeprefix("gs://"))
        top, subs = [], set()
        for n in self._names(prefix):
            rest = n[strip:]
            if "/" in rest:
                subs.add(rest.split("/", 1)[0] + "/")
            else:
                data, gen = self.objects_[n]
                top.append(Listed(rest, len(data), 0.0, gen))
        return top, sorted(subs)

    def objects(self, prefix: str) -> Iterator[Listed]:
        with self.lock:
            self.calls["objects"] += 1
        prefix = prefix.rstrip("/") + "/"
        strip = len(prefix.removeprefix("gs://"))
        for n in self._names(prefix):
            data, gen = self.objects_[n]
            yield Listed(n[strip:], len(data), 0.0, gen)

    def fetch(self, path: str, generation: int | None, start: int, length: int) -> bytes:
        name = path.removeprefix("gs://")
        with self.lock:
            self.calls["fetch"] += 1
            self.fetched[name] += 1
        if name in self.fail:
            raise StorageError(f"{path}: still failing after retrying for 1 s (HTTP 503)")
        if name not in self.objects_ or (generation is not None and self.objects_[name][1] != generation):
            raise FileNotFoundError(path)
        return self.objects_[name][0][start : start + length]

    def read(self, path: str, limit: int) -> tuple[bytes, int | None] | None:
        name = path.removeprefix("gs://")
        if name not in self.objects_:
            return None
        data, gen = self.objects_[name]
        return data[:limit], gen


def _fleet(runs: int = 6) -> dict[str, bytes]:
    objects = {"bkt/fleet/README.md": b"x", "bkt/fleet/a-b.json": b"{}"}
    for i in range(runs):
        wf = ("wf", "wf-2")[i % 2]
        objects[f"bkt/fleet/{wf}/run-{i}/aw_info.json"] = b'{"run_id": %d}' % i
        objects[f"bkt/fleet/{wf}/run-{i}/mcp-logs/gateway.jsonl"] = b"line\n" * (i + 1)
    return objects


def test_a_fleet_is_listed_in_name_order_its_folders_concurrently():
    store = MemoryStore(_fleet())
    listed = [e.rel for e in walk_objects(store, "gs://bkt/fleet", ahead=2)]
    assert listed == sorted(n.removeprefix("bkt/fleet/") for n in _fleet())
    assert store.calls == Counter(folders=1, objects=2)  # the top once, each workflow folder once
    grouping = FleetRuns("gs://bkt/fleet")
    runs = dict(grouping.runs(e[:3] for e in walk_objects(store, "gs://bkt/fleet")))
    assert sorted(runs) == ["", *sorted(f"{('wf', 'wf-2')[i % 2]}/run-{i}" for i in range(6))]
    assert grouping.stray == 1  # the README


@pytest.mark.parametrize("after", [0, 1], ids=["at-once", "after-a-page"])
def test_a_folder_that_fails_to_list_is_listed_as_unreadable_where_its_entries_would_come(after):
    """A workflow folder whose listing fails after retries (at once, or after a page) is one
    unreadable folder in the listing, where its entries come, and the fleet's other folders are
    listed: it becomes a run of its own, whose reading lists it again (and dead-letters it)."""
    class Failing(MemoryStore):
        def objects(self, prefix: str) -> Iterator[Listed]:
            items = super().objects(prefix)
            if prefix.endswith("wf-2/"):
                yield from itertools.islice(items, after)
                raise StorageError(f"{prefix}: still failing after retrying for 1 s (HTTP 503)")
            yield from items

    listed = list(walk_objects(Failing(_fleet()), "gs://bkt/fleet", ahead=2))
    wf2 = [e.rel for e in listed if e.rel.startswith("wf-2/")]
    assert wf2 == [*["wf-2/run-1/aw_info.json"][:after], "wf-2/."]
    at = listed.index(Listed("wf-2/.", UNREADABLE_DIR, 0.0, None))
    assert listed[at + 1].rel.startswith("wf/")  # where wf-2/'s entries end, before wf/'s
    assert [e.rel for e in listed if e.rel.startswith("wf/")] == sorted(
        n.removeprefix("bkt/fleet/") for n in _fleet() if n.startswith("bkt/fleet/wf/"))
    runs = dict(FleetRuns("gs://bkt/fleet").runs(e[:3] for e in listed))
    assert runs["wf-2"] == [(".", UNREADABLE_DIR, 0.0)]

def test_each_file_is_one_request_read_twice_or_not():
    store = MemoryStore(_fleet())
    reader = RunReader(store, threads=4)
    try:
        for i in range(3):
            reader.submit("gs://bkt/fleet", f"wf/run-{2 * i}")
        listing = reader.listing("gs://bkt/fleet", "wf/run-2")
        assert [e[:2] for e in listing] == [("aw_info.json", 13), ("mcp-logs/gateway.jsonl", 15)]
        files = run_files("gs://bkt/fleet/wf/run-2", listing, reader)
        assert files.read("aw_info.json") == b'{"run_id": 2}'
        assert files.read("aw_info.json") == b'{"run_id": 2}'  # a second reading asks nothing more
        assert list(files.iter_lines("mcp-logs/gateway.jsonl")) == [b"line\n"] * 3
        reader.release("gs://bkt/fleet/wf/run-2")
        assert store.fetched["bkt/fleet/wf/run-2/aw_info.json"] == 1
        assert store.fetched["bkt/fleet/wf/run-2/mcp-logs/gateway.jsonl"] == 1
        assert store.calls["objects"] == 3  # each run listed once
    finally:
        reader.close()
    assert reader.held == 0


def test_what_is_fetched_ahead_stays_within_the_byte_budget():
    objects = {f"bkt/f/wf/run-{i}/aw_info.json": bytes(1000) for i in range(20)}
    store = MemoryStore(objects)
    reader = RunReader(store, threads=4, budget=3000)
    try:
        for i in range(20):
            reader.submit("gs://bkt/f", f"wf/run-{i}")
        for _ in range(200):  # let the pool run as far ahead as the budget allows
            with reader.lock:
                held = reader.held
            assert held <= 3000  # two heads fit (each asks one byte past its size), not three
            if sum(store.fetched.values()) >= 2:
                break
            threading.Event().wait(0.01)
        for i in range(20):  # each run read in turn: the fetches behind it go on as bytes are released
            root = f"gs://bkt/f/wf/run-{i}"
            files = run_files(root, reader.listing("gs://bkt/f", f"wf/run-{i}"), reader)
            assert files.read("aw_info.json") == bytes(1000)
            reader.release(root)
        assert sum(store.fetched.values()) == 20
    finally:
        reader.close()


def test_a_file_past_the_first_chunk_is_read_chunk_by_chunk(monkeypatch):
    monkeypatch.setattr(storage, "FETCH_CHUNK", 64)
    data = bytes(range(200))
    store = MemoryStore({"bkt/f/run-1/aw_info.json": data})
    reader = RunReader(store, threads=2)
    try:
        files = run_files("gs://bkt/f/run-1", reader.listing("gs://bkt/f", "run-1"), reader)
        assert files.read("aw_info.json") == data
        assert store.fetched["bkt/f/run-1/aw_info.json"] == 4  # 64 + 64 + 64 + the last 8
    finally:
        reader.close()


def test_a_file_replaced_since_listed_is_read_as_it_is_and_one_that_fails_raises_at_open():
    store = MemoryStore(_fleet())
    reader = RunReader(store, threads=2)
    try:
        listing = reader.listing("gs://bkt/fleet", "wf/run-0")
        store.objects_["bkt/fleet/wf/run-0/aw_info.json"] = (b'{"run_id": 9}', 99)  # a new generation
        store.fail.add("bkt/fleet/wf/run-0/mcp-logs/gateway.jsonl")
        reader.release("gs://bkt/fleet/wf/run-0")
        files = run_files("gs://bkt/fleet/wf/run-0", listing, reader)
        assert files.read("aw_info.json") == b'{"run_id": 9}'
        with pytest.raises(StorageError, match=r"gateway\.jsonl: still failing after retrying"):
            files.read("mcp-logs/gateway.jsonl")
    finally:
        reader.close()


def test_list_run_is_the_runs_own_files_on_an_object_store():
    store = MemoryStore({**_fleet(), "bkt/fleet/wf/run-10/aw_info.json": b"{}"})
    assert [e[0] for e in list_run("gs://bkt/fleet", "wf/run-1", store)] == []
    assert [e[0] for e in list_run("gs://bkt/fleet", "wf-2/run-1", store)] == ["aw_info.json",
                                                                                "mcp-logs/gateway.jsonl"]
