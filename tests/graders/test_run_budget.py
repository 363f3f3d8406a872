"""A run's reading budget (issue 28): files listed, bytes read and time taken per run are
bounded, each with a clear error naming the run folder and the budget."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

import graders.prepare as prepare_module
from graders.prepare import prepare_run
from graders.runs import runfiles
from graders.runs.runfiles import (
    RunFiles,
    RunOverBudget,
    bounded_listing,
    local_run_files,
    memory_run_files,
)

READS = [lambda f, rel: f.read(rel), lambda f, rel: list(f.iter_line_batches(rel, 16)),
         lambda f, rel: list(f.iter_lines(rel))]


def _folder(tmp_path: Path, n: int) -> str:
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    for i in range(n):
        (run / ("sub" if i % 2 else ".") / f"f{i}.txt").write_text("x")
    return str(run)


def test_a_run_folder_with_more_files_than_the_budget_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(runfiles, "MAX_RUN_FILES", 3)
    assert len(local_run_files(_folder(tmp_path / "a", 3)).sizes) == 3
    root = _folder(tmp_path / "b", 4)
    with pytest.raises(RunOverBudget, match=f"^{root}: run folder holds more than 3 files"):
        local_run_files(root)
    with pytest.raises(RunOverBudget, match="memory:: run folder holds more than 3 files"):
        memory_run_files({f"f{i}": b"" for i in range(4)})


def test_a_listing_is_not_read_past_one_entry_over_the_budget(monkeypatch):
    monkeypatch.setattr(runfiles, "MAX_RUN_FILES", 3)

    def endless() -> Iterator[tuple[str, int, float]]:
        n = 0
        while True:
            n += 1
            assert n <= 4, "listed past the budget"
            yield f"f{n}", 1, 0.0

    with pytest.raises(RunOverBudget, match="more than 3 files"):
        bounded_listing("run", endless())


@pytest.mark.parametrize("read", READS)
def test_the_bytes_read_per_run_are_bounded_across_its_files(read, monkeypatch):
    monkeypatch.setattr(runfiles, "MAX_RUN_BYTES", 100)
    files = memory_run_files({"a": b"line\n" * 12, "b": b"line\n" * 12}, root="run")
    read(files, "a")  # 60 bytes: within the budget
    with pytest.raises(RunOverBudget, match=r"^run: read more than 100 bytes from the run folder \(at b\)"):
        read(files, "b")


def test_a_whole_read_asks_for_no_more_than_the_budget_left(monkeypatch):
    monkeypatch.setattr(runfiles, "MAX_RUN_BYTES", 1000)
    asked: list[int] = []

    class Zeros(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def read(self, n: int = -1) -> bytes:
            asked.append(n)
            return b"\0" * n

    files = RunFiles("run", {"x": 0}, lambda rel: Zeros())
    with pytest.raises(RunOverBudget, match="read more than 1000 bytes"):
        files.read("x")  # listed as empty, endless when read: refused after the budget, not 50 MiB
    assert asked == [1, 1000]  # its listed size and a byte, then the rest of the budget and a byte


@pytest.mark.parametrize("content", [b"", b"{}", b"x" * 5000])
@pytest.mark.parametrize("listed", [0, 2, 4999, 5000, 5001, 10_000])
def test_a_whole_read_asks_for_the_listed_size_first_and_gets_the_whole_file(content, listed):
    # A read of the whole budget at once allocates all of it (50 MiB for every small file).
    asked: list[int] = []

    class Recorded(io.BytesIO):
        def read(self, n: int | None = -1) -> bytes:
            asked.append(-1 if n is None else n)
            return super().read(n)

    files = RunFiles("run", {"x": listed}, lambda rel: Recorded(content))
    assert files.read("x") == content  # also when it grew, or shrank, since it was listed
    assert asked[0] == listed + 1 and len(asked) == (1 if len(content) <= listed else 2)
    assert files.bytes_read == len(content)


class FakeClock:
    def __init__(self, step: float = 0.0) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.mark.parametrize("read", READS)
def test_a_run_that_takes_longer_than_its_time_budget_to_read_is_refused(read, monkeypatch):
    monkeypatch.setattr(runfiles, "MAX_RUN_SECONDS", 5.0)
    monkeypatch.setattr(runfiles, "clock", FakeClock(step=2.0))  # each look at the clock: 2 s later
    files = memory_run_files({"a": b"x", "slow": b"line\n" * 40}, root="run")
    read(files, "a")
    with pytest.raises(RunOverBudget, match=r"^run: run folder took longer than 5 s to read and preprocess \(at slow\)"):
        read(files, "slow")


def test_preprocessing_after_the_last_read_counts_against_the_time_budget(tmp_path, monkeypatch):
    run = tmp_path / "wf" / "2026-05-01" / "run-1"
    run.mkdir(parents=True)
    (run / "aw_info.json").write_text('{"run_id": 1, "created_at": "2026-05-01T00:00:00Z"}')
    clock = FakeClock()
    monkeypatch.setattr(runfiles, "clock", clock)
    monkeypatch.setattr(runfiles, "MAX_RUN_SECONDS", 5.0)
    assert prepare_run(local_run_files(str(run)), "wf/2026-05-01/run-1").meta.run_id == "1"
    real = prepare_module.read_trajectory_ir_file

    def slow(*args: object) -> object:  # the last step of preparing a run, after every read
        clock.now += 6.0
        return real(*args)

    monkeypatch.setattr(prepare_module, "read_trajectory_ir_file", slow)
    with pytest.raises(RunOverBudget, match=f"^{run}: run folder took longer than 5 s to read and preprocess; not graded"):
        prepare_run(local_run_files(str(run)), "wf/2026-05-01/run-1")
