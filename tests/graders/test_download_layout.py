"""`gh aw logs` downloads grade as their artifact root did (graders/runs/download_layout.py).

Each case builds a run folder the way a download lays it out and the artifact-root folder the
in-job grader saw (from the real samples in tests/data/real/gh_aw_logs where they exist, else
from the example fleet), grades both through the CLI's grade path, and compares the
reference-compatible results (values, statuses, messages) and the preprocessed trace.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.runs.download_layout import (
    AGENT_PREFIXES,
    SANDBOX_TOKEN_USAGE,
    USAGE_TOKEN_USAGE,
    _mapped,
    artifact_root_paths,
)
from graders.runs.layout import run_root_of
from graders.runs.runfiles import local_run_files
from pipeline.cli import main
from tests.conftest import REPO

REAL = REPO / "tests" / "data" / "real" / "gh_aw_logs"
FLEET = REPO / "examples" / "fleet"
TOKENS = SANDBOX_TOKEN_USAGE[2]  # where every real sample has its token usage


def _move(run: Path, src: str, dst: str) -> None:
    (run / dst).parent.mkdir(parents=True, exist_ok=True)
    (run / src).rename(run / dst)
    parent = (run / src).parent
    while parent != run and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _write(run: Path, rel: str, data: bytes) -> None:
    (run / rel).parent.mkdir(parents=True, exist_ok=True)
    (run / rel).write_bytes(data)


def _copy(src: Path, dest: Path, edit: Callable[[Path], None]) -> Path:
    run = dest / "wf" / "run-4242"
    shutil.copytree(src, run)
    edit(run)
    return run


def _contents(run: Path) -> dict[str, bytes]:
    return {p.relative_to(run).as_posix(): p.read_bytes() for p in run.rglob("*") if p.is_file()}


def _graded(run: Path, out: Path) -> tuple[dict, dict]:
    assert main(["grade", str(run), "--out", str(out)]) == 0
    return (json.loads((out / "grader_results.json").read_text()),
            json.loads((out / "grader_payload.json").read_text()))


def _same_grades(tmp_path: Path, src: Path, download: Callable[[Path], None],
                 root: Callable[[Path], None] = lambda run: None) -> tuple[dict, dict]:
    dl = _copy(src, tmp_path / "download", download)
    ar = _copy(src, tmp_path / "artifact-root", root)
    assert _contents(dl) != _contents(ar)  # the two folders do differ
    got, got_trace = _graded(dl, tmp_path / "out-download")
    want, want_trace = _graded(ar, tmp_path / "out-root")
    assert got == want  # every grader's value, status and message, and the run summary
    assert got_trace == want_trace
    return got, got_trace


def _value(results: dict, grader: str) -> object:
    return next(r.get("value") for r in results["results"] if r["id"] == grader)


@pytest.mark.parametrize("sample", ["ghaw-claude-awf-steering-notices", "ghaw-copilot-subagent-failed-and-alias"])
def test_usage_agent_usage_is_the_root_agent_usage(tmp_path, sample):
    _results, trace = _same_grades(tmp_path, REAL / sample, lambda run: None,
                                  lambda run: _move(run, "usage/agent_usage.json", "agent_usage.json"))
    assert trace["agentUsage"] is not None and trace["steps"]


def test_a_usage_only_download_falls_back_to_the_packaged_token_usage(tmp_path):
    def usage_only(run: Path) -> None:  # `gh aw logs --artifacts usage`
        _move(run, TOKENS, USAGE_TOKEN_USAGE)
        _move(run, "agent_usage.json", "usage/agent_usage.json")

    results, trace = _same_grades(tmp_path, REAL / "ghaw-copilot-routed-gpt-responses", usage_only)
    assert _value(results, "execution-step-count") == 5 and trace["agentUsage"] is not None


@pytest.mark.parametrize("sandbox", SANDBOX_TOKEN_USAGE)
def test_the_sandbox_token_usage_wins_over_the_packaged_copy(tmp_path, sandbox):
    def both(run: Path) -> None:
        _move(run, TOKENS, sandbox)
        first = (run / sandbox).read_bytes().split(b"\n")[0]
        _write(run, USAGE_TOKEN_USAGE, first + b"\n")  # differs: one record, not five

    results, _ = _same_grades(tmp_path, REAL / "ghaw-copilot-routed-gpt-responses", both,
                              lambda run: _move(run, TOKENS, sandbox))
    assert _value(results, "execution-step-count") == 5


def test_the_detection_phase_is_never_agent_steps(tmp_path):
    def detection(run: Path) -> None:
        tokens = (run / TOKENS).read_bytes()
        _move(run, TOKENS, USAGE_TOKEN_USAGE)
        _write(run, "usage/detection/token_usage.jsonl", tokens * 3)
        _write(run, "usage/detection_usage.json", b'{"input_tokens": 99}')

    results, _ = _same_grades(tmp_path, REAL / "ghaw-legacy-no-session-routing", detection)
    assert _value(results, "execution-step-count") == len((REAL / "ghaw-legacy-no-session-routing" / TOKENS)
                                                          .read_bytes().strip().split(b"\n"))


@pytest.mark.parametrize("prefix", AGENT_PREFIXES)
def test_an_agent_artifact_with_its_tmp_gh_aw_prefix(tmp_path, prefix):
    def nested(run: Path) -> None:
        for rel in ("agent-session.jsonl", "agent_usage.json", TOKENS):
            _move(run, rel, prefix + rel)

    _results, trace = _same_grades(tmp_path, REAL / "ghaw-copilot-routed-gpt-responses", nested)
    assert trace["steps"] and trace["agentUsage"] is not None


def test_the_firewall_audit_logs_artifact_is_the_first_token_candidate(tmp_path):
    audit = SANDBOX_TOKEN_USAGE[0]
    other = b'{"input_tokens": 1, "output_tokens": 1}\n'

    def download(run: Path) -> None:  # the separate AWF artifact, and the agent artifact's log
        _move(run, audit, audit.removeprefix("sandbox/"))
        _write(run, TOKENS, other)

    _results, trace = _same_grades(tmp_path, FLEET / "ci-doctor" / "run-7100470", download,
                                  lambda run: _write(run, TOKENS, other))
    assert trace["totalRequests"] > 1  # the audit file was read, as in the job, not the one-line log


def test_usage_graders_and_evals_are_the_agent_graders_and_root_evals(tmp_path):
    evals = b'{"id": "q1", "answer": "YES"}\n{"id": "q2", "answer": "no"}\n'

    def download(run: Path) -> None:
        for name in ("operational_value_evaluator.sh", "grader_results.json", "grader_manifest.json"):
            _move(run, f"agent/graders/{name}", f"usage/graders/{name}")
        _write(run, "usage/evals.jsonl", evals)

    results, _ = _same_grades(tmp_path, FLEET / "daily-file-diet" / "run-7100390", download,
                              lambda run: _write(run, "evals.jsonl", evals))
    assert results["context"]["evals"]["byQuestion"] == {"q1": "YES", "q2": "NO"}
    assert any(r["id"] == "operational-value" for r in results["results"])


def test_a_mapped_file_is_read_and_named_where_it_is_listed(tmp_path):
    run = _copy(REAL / "ghaw-claude-awf-steering-notices", tmp_path, lambda run: None)
    files = local_run_files(run)
    assert "agent_usage.json" in files.sizes and "usage/agent_usage.json" not in files.sizes
    assert files.read("agent_usage.json") == (run / "usage" / "agent_usage.json").read_bytes()
    assert files.display("agent_usage.json").endswith("/usage/agent_usage.json")
    assert "usage/aw_session.jsonl" in files.sizes  # no artifact-root place: kept where it is


@pytest.mark.parametrize("rel,root", [
    ("wf/123/tmp/gh-aw/mcp-logs/gateway.jsonl", "wf/123"),
    ("wf/123/agent-artifacts/tmp/gh-aw/aw_info.json", "wf/123"),
    ("wf/123/firewall-audit-logs/api-proxy-logs/token-usage.jsonl", "wf/123"),
    ("wf/123/usage/agent/token_usage.jsonl", "wf/123"),
    ("wf/tmp/123/aw_info.json", "wf/tmp/123"),  # a folder named tmp is no artifact root on its own
])
def test_discovery_finds_the_run_of_a_download_file(rel, root):
    assert run_root_of(rel) == root


# Paths built from the names the mapping looks at, plus others, "." and "..".
_PART = st.sampled_from(["tmp", "gh-aw", "agent", "agent-artifacts", "usage", "graders", "agent_usage.json",
                         "evals.jsonl", "firewall-audit-logs", "api-proxy-logs", "token-usage.jsonl",
                         "token_usage.jsonl", "sandbox", "firewall", "logs", "audit", "detection", "x", ".", ".."])
_PATH = st.one_of(st.lists(_PART, min_size=1, max_size=6).map("/".join),
                  st.sampled_from([USAGE_TOKEN_USAGE, *SANDBOX_TOKEN_USAGE, "usage/agent_usage.json",
                                   "agent_usage.json", "usage/graders/grader_results.json",
                                   "agent/graders/grader_results.json", "tmp/gh-aw/agent_usage.json"]))
_DOWNLOAD_ONLY = (*AGENT_PREFIXES, "usage/", "firewall-audit-logs/")


def _inside(rel: str) -> bool:
    return not rel.startswith("/") and all(p not in ("", ".", "..") for p in rel.split("/"))


@settings(max_examples=300, deadline=None)
@given(st.lists(_PATH, max_size=12))
def test_mapping_properties(listed):
    out = artifact_root_paths(listed)
    assert sorted(out.values()) == sorted(set(listed))  # every listed file once, under one name
    for rel, src in out.items():
        assert rel == src or (_inside(rel) and _inside(src))  # nothing moved to, or from, outside the run
    for rel in listed:
        if not rel.startswith(_DOWNLOAD_ONLY):
            assert out[rel] == rel  # a real artifact-root path always wins
    root_only = [rel for rel in listed if not rel.startswith(_DOWNLOAD_ONLY)]
    assert artifact_root_paths(root_only) == {rel: rel for rel in root_only}  # identity on an artifact root
    assert artifact_root_paths(list(out)) == {rel: rel for rel in out} or any(
        rel.startswith(_DOWNLOAD_ONLY) for rel in out)
    if USAGE_TOKEN_USAGE in listed and any(p in listed for p in SANDBOX_TOKEN_USAGE):
        assert out[USAGE_TOKEN_USAGE] == USAGE_TOKEN_USAGE  # the packaged copy is only a fallback


def _fleet(base: Path, layouts: dict[str, Callable[[Path], None]]) -> Path:
    for sample, edit in layouts.items():
        run = base / "Task" / sample.removeprefix("ghaw-")  # no run- prefix: found by its artifact names
        shutil.copytree(REAL / sample, run)
        edit(run)
    return base


def _grades(output: Path) -> list[tuple]:
    from pipeline.tables import connect

    con = connect(str(output))
    assert not (output / "dead_letter").exists()  # written only when a run is dead-lettered
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 3
    return con.execute("SELECT * FROM grader_results ORDER BY ALL").fetchall()


def test_a_fleet_of_downloads_grades_as_its_artifact_roots(tmp_path):
    def old_structure(run: Path) -> None:  # everything, aw_info.json too, under the job's prefix
        for rel in ("aw_info.json", "agent-session.jsonl", "agent_usage.json", TOKENS):
            _move(run, rel, "agent-artifacts/tmp/gh-aw/" + rel)

    def usage_only(run: Path) -> None:
        _move(run, TOKENS, USAGE_TOKEN_USAGE)

    downloads = _fleet(tmp_path / "downloads", {
        "ghaw-copilot-routed-gpt-responses": old_structure,
        "ghaw-claude-awf-steering-notices": lambda run: None,
        "ghaw-copilot-subagent-failed-and-alias": usage_only,
    })
    roots = _fleet(tmp_path / "roots", {
        "ghaw-copilot-routed-gpt-responses": lambda run: None,
        "ghaw-claude-awf-steering-notices": lambda run: _move(run, "usage/agent_usage.json", "agent_usage.json"),
        "ghaw-copilot-subagent-failed-and-alias": lambda run: _move(run, "usage/agent_usage.json",
                                                                    "agent_usage.json"),
    })
    for fleet in (downloads, roots):
        assert main(["run", "--input", str(fleet), "--output", str(fleet) + "-out", "--log-level", "WARNING"]) == 0
    got, want = _grades(Path(str(downloads) + "-out")), _grades(Path(str(roots) + "-out"))
    assert got == want and len(got) > 3


@settings(max_examples=300, deadline=None)
@given(st.lists(_PATH, max_size=12))
def test_a_listing_kept_as_listed_is_one_the_full_mapping_keeps_too(listed):
    # artifact_root_paths skips the mapping when no name starts with a path it moves.
    names = list(dict.fromkeys(listed))
    assert artifact_root_paths(listed) == _mapped(names)
