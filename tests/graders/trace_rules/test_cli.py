from __future__ import annotations

import argparse
import json

import pytest

from pipeline import cli, cmd_trace


def run(capsys, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="fleetgrade")
    cmd_trace.register(parser.add_subparsers())
    args = parser.parse_args(["trace", *argv])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_registered_in_cli():
    assert "pipeline.cmd_trace" in cli.COMMAND_MODULES


def test_self_test(capsys):
    code, out, _ = run(capsys, "--self-test")
    assert code == 0
    assert "summary: runs=5 tasks=3 | clean=3 warn=0 corrupt=1 fail=1 | repeatable=2 flaky=1" in out
    assert out.count("[OK ]") == 5 and out.rstrip().endswith("SELF-TEST: ALL PASS")


def test_k_adds_estimates_without_touching_reference_keys(tmp_path, capsys):
    traces = tmp_path / "t.json"
    traces.write_text(json.dumps({"runs": [{"task": "T", "ok": ok, "steps": []} for ok in (1, 1, 0, 1)]}))
    code, out, _ = run(capsys, "--traces", str(traces), "--json", "--k", "2")
    doc = json.loads(out)
    assert code == 3
    assert list(doc) == ["runs", "pass_k", "summary", "pass_k_estimates"]
    assert doc["pass_k"]["T"] == {"k": 4, "n_success": 3, "n_fail": 1, "pass_hat_k": False}
    assert doc["pass_k_estimates"]["T"]["pass_k"][1] == {"k": 2, "pass_hat_k": 0.5, "pass_at_k": 1.0}
    code, human, _ = run(capsys, "--traces", str(traces), "--k", "2")
    assert "    T: n=4 c=3 | k=1 pass^k=0.750 pass@k=0.750 | k=2 pass^k=0.500 pass@k=1.000" in human


def test_k_must_be_positive(capsys):
    with pytest.raises(SystemExit) as e:
        run(capsys, "--traces", "x", "--k", "0")
    assert e.value.code == 2


def test_missing_config_is_noted(tmp_path, capsys):
    traces = tmp_path / "t.json"
    traces.write_text("[]")
    code, _, err = run(capsys, "--traces", str(traces), "--config", str(tmp_path / "none.yaml"))
    assert code == 0 and "not found; using engine defaults" in err


def test_null_step_budget_is_a_config_error(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("step_budget: null\n")
    traces = tmp_path / "t.json"
    traces.write_text("[]")
    code, out, err = run(capsys, "--traces", str(traces), "--config", str(cfg))
    assert code == 1 and out == ""
    assert "config key 'step_budget' must be an integer, got null" in err


def test_copilot_source_and_directory_input(tmp_path, capsys):
    code, _, err = run(capsys, "--copilot-events", str(tmp_path))
    assert code == 1 and "cannot read --copilot-events file" in err


def test_packaged_fixture_matches_the_corpus_and_self_test_report(capsys):
    from graders.families.trace_rules.selftest import load_fixture
    from tests.conftest import conformance_dir

    corpus = conformance_dir() / "trace-grader"
    assert load_fixture() == json.loads((corpus / "case-002-selftest-fixture" / "traces.json").read_text())
    human = json.loads((corpus / "case-043-human-output-fixture" / "expected.json").read_text())["stdout"]
    _, out, _ = run(capsys, "--self-test")
    assert out.startswith(human.rstrip("\n") + "\n")
