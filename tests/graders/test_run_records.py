"""A run's record budget and streamed session files (docs/hostile-input.md, "Memory")."""

from __future__ import annotations

import hashlib
import json

import pytest

from graders.formats import Source
from graders.formats.claude_code import read_session
from graders.prepare import prepare_run
from graders.prepare_sessions import FileStream, SessionFailure, prepare_sessions
from graders.runs import runfiles
from graders.runs.runfiles import RunOverBudget, local_run_files, memory_run_files
from tests.helpers.big_runs import REAL, SESSION, tiny_calls_session


def test_a_session_keeping_more_records_than_the_budget_is_its_own_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(runfiles, "MAX_RUN_RECORDS", 2000)
    tiny_calls_session(tmp_path / "a", 2000)
    tiny_calls_session(tmp_path / "b", 2001)
    (tmp_path / "a" / "s.jsonl").rename(tmp_path / "ok.jsonl")
    (tmp_path / "b" / "s.jsonl").rename(tmp_path / "over.jsonl")
    out = list(prepare_sessions(local_run_files(tmp_path), "wf/2026-05-01"))
    assert [type(o).__name__ for o in out] == ["PreparedRun", "SessionFailure"]
    failure = out[1]
    assert isinstance(failure, SessionFailure) and failure.path.endswith("/over.jsonl")
    assert "more than 2000 records (log lines, tool calls, usage records) kept" in str(failure.error)
    assert "(at over.jsonl)" in str(failure.error)


def test_a_gh_aw_run_keeping_more_log_lines_than_the_budget_is_refused(monkeypatch):
    monkeypatch.setattr(runfiles, "MAX_RUN_RECORDS", 100)
    line = b'{"type":"tool_call","tool_name":"a"}\n'
    ok = memory_run_files({"aw_info.json": b'{"created_at": "2026-05-01T00:00:00Z"}',
                           "mcp-logs/gateway.jsonl": line * 100}, root="wf/run-1")
    assert len(prepare_run(ok, "wf/run-1").trace["toolCalls"]) == 100
    over = memory_run_files({"aw_info.json": b'{"created_at": "2026-05-01T00:00:00Z"}',
                             "mcp-logs/gateway.jsonl": line * 101}, root="wf/run-1")
    with pytest.raises(RunOverBudget, match=r"^wf/run-1: more than 100 records .* \(at mcp-logs/gateway.jsonl\)"):
        prepare_run(over, "wf/run-1")


def test_a_reader_that_breaks_on_one_file_fails_that_file_only(tmp_path, monkeypatch):
    """prepare_sessions never raises, so its sessions are graded as they come (never all held)."""
    from graders.formats import claude_code

    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_bytes((REAL / f"{SESSION}.jsonl").read_bytes())
    real = claude_code.read_session

    def broken(source: Source):
        if source.name.endswith("/a.jsonl"):
            raise TypeError("a reader's bug")
        return real(source)

    monkeypatch.setattr(claude_code, "read_session", broken)
    out = list(prepare_sessions(local_run_files(tmp_path), "wf"))
    assert [type(o).__name__ for o in out] == ["SessionFailure", "PreparedRun"]
    assert isinstance(out[0], SessionFailure) and str(out[0].error) == "a reader's bug"


def test_a_streamed_session_reads_as_one_held_whole(tmp_path):
    """Same sessions, warnings and line numbers from a stream as from the bytes; the digest of a
    file its reader did not read (a compaction transcript) is taken too."""
    folder = REAL
    rels = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.jsonl"))
    # A line break JSON does not know (\x85, \r) and bad UTF-8: numbered as splitlines numbers them.
    main = (folder / f"{SESSION}.jsonl").read_bytes() + b'{"a":1}\r\nnot json\x85x\n\xff\n'
    name = f"{SESSION}.jsonl"
    related = {r: (folder / r).read_bytes() for r in rels if r != name}
    whole = read_session(Source(name, main, related))
    files = memory_run_files({name: main, **related})
    streams = {r: FileStream(files, r) for r in files.sizes}
    streamed = read_session(Source(name, streams[name], {r: s for r, s in streams.items() if r != name}))
    assert streamed.warnings == whole.warnings and any(":102: skipped" in w for w in whole.warnings)
    assert (streamed.calls, streamed.usage, streamed.run_id) == (whole.calls, whole.usage, whole.run_id)
    assert any(c.agent == "aac57f5" for c in whole.calls)  # the subagent file was read
    for rel, stream in streams.items():  # the compaction transcript, not read by the reader, too
        data = {name: main, **related}[rel]
        assert stream.digest() == (len(data), hashlib.sha256(data).hexdigest()), rel


def test_a_head_is_read_once_and_not_charged(monkeypatch):
    monkeypatch.setattr(runfiles, "MAX_RUN_BYTES", 10)
    files = memory_run_files({"a.jsonl": json.dumps({"x": 1}).encode()})
    stream = FileStream(files, "a.jsonl")
    assert stream.head(4) == b'{"x"' and stream.head(2) == b'{"' and files.bytes_read == 0
    assert list(stream.lines()) == [b'{"x": 1}'] and files.bytes_read == 8
