"""The reference baseline's wiring: the Node driver, the source copy, and "not measured"."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bench import ghaw_setup, reference

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

# Stand-ins with the interface of gh-aw's modules (not gh-aw code): preprocessing reads the run's
# agent_output.json at the fixed /tmp/gh-aw root and needs a helper module that is absent here.
FAKE_TRACE_GRADERS = r"""
const fs = require("fs");
const { getErrorMessage } = require("./error_helpers.cjs");
function preprocessTrace() {
  const p = "/tmp/gh-aw/agent_output.json";
  const items = fs.existsSync(p) ? JSON.parse(fs.readFileSync(p, "utf-8")).items : [];
  return { toolCalls: [], artifacts: items, helper: getErrorMessage(new Error("ok")) };
}
const BUILTIN_GRADERS = { "artifact-production": trace => trace.artifacts.length };
const BUILTIN_META = { "artifact-production": { unit: "count", direction: "higher_is_better" } };
function normalizeResult(id, raw, meta) {
  const value = raw !== null && typeof raw === "object" ? raw.value : raw;
  return { id, value: value ?? null, unit: meta.unit || "", status: value == null ? "unavailable" : "pass" };
}
function runBuiltinGrader(id, trace, meta) { return normalizeResult(id, BUILTIN_GRADERS[id](trace), meta); }
module.exports = { preprocessTrace, runBuiltinGrader, normalizeResult, BUILTIN_GRADERS, BUILTIN_META };
"""
FAKE_TRAJECTORY = r"""
const TRAJECTORY_GRADERS = { "objective-coverage": trace => ({ value: trace.helper === "ok" ? 1 : 0 }) };
const TRAJECTORY_GRADER_META = { "objective-coverage": { name: "Objective Coverage", unit: "ratio" } };
module.exports = { TRAJECTORY_GRADERS, TRAJECTORY_GRADER_META };
"""


def _fake_checkout(root: Path) -> Path:
    js = root / ghaw_setup.JS_DIR
    js.mkdir(parents=True)
    (js / "trace_graders.cjs").write_text(FAKE_TRACE_GRADERS)
    (js / "trajectory_graders.cjs").write_text(FAKE_TRAJECTORY)
    return js


def _run(root: Path, items: int) -> Path:
    root.mkdir(parents=True)
    (root / "agent_output.json").write_text(json.dumps({"items": [{"type": "noop"}] * items}))
    return root


@needs_node
def test_the_driver_grades_each_run_from_its_own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    js = _fake_checkout(tmp_path / "gh-aw")
    monkeypatch.setenv("FLEETGRADE_GH_AW", str(js))
    assert reference.unavailable() is None
    runs = [_run(tmp_path / "fleet" / f"run-{n}", n) for n in (1, 3)]
    with reference.Reference() as ref:
        ref.set_runs(runs)
        assert ref.shims == ["error_helpers.cjs"]  # absent from the copy: the driver stood in
        assert len(ref.one_pass()) == 2
        assert all(ref.one(i) >= 0 for i in range(2))  # one run at a time, as the tiers interleave them
        with pytest.raises(RuntimeError, match="unknown command"):
            ref.one(2)  # no third run
        values = [{r["id"]: r["value"] for r in ref.results(run)} for run in runs]
    # /tmp/gh-aw/agent_output.json was read from each run's folder, and the shim answered.
    assert values == [{"artifact-production": 1, "objective-coverage": 1},
                      {"artifact-production": 3, "objective-coverage": 1}]


def test_without_sources_the_reference_is_not_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETGRADE_GH_AW", str(tmp_path))
    reason = reference.unavailable()
    assert reason is not None
    rows = reference.reference_rows("mixed", 10, 1.0, 2.0, None, [], reason)
    # Both targets that need the reference are marked, so each reads "not measured".
    assert [r["target"] for r in rows] == ["tier-reference", "tier-pipeline-reference"]
    assert all(r["value"] is None and "ratio" not in r and r["note"].startswith("reference not measured: ")
               for r in rows)
    measured = reference.reference_rows("mixed", 10, 1.0, 2.0, 3.0, [], None)
    assert [(r["ratio"], r["target"]) for r in measured if "ratio" in r] == [
        (3.0, "tier-reference"), (1.5, "tier-pipeline-reference")]


def test_setup_copies_the_modules_and_what_they_require(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    js = _fake_checkout(tmp_path / "work-tree")
    (js / "error_helpers.cjs").write_text('require("./deeper.cjs");\nmodule.exports = {};\n')
    (js / "deeper.cjs").write_text("module.exports = {};\n")
    (js / "unrelated.cjs").write_text("module.exports = {};\n")
    monkeypatch.setattr(ghaw_setup, "BENCH_DIR", tmp_path / "bench")
    copied, missing = ghaw_setup.copy_sources(tmp_path / "work-tree", tmp_path / "out")
    assert sorted(copied) == ["deeper.cjs", "error_helpers.cjs", "trace_graders.cjs", "trajectory_graders.cjs"]
    assert missing == []

    # The same from a bare git directory (a mirror), read with git show.
    tree = tmp_path / "work-tree"
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(tree), str(tmp_path / "mirror.git")], check=True)
    copied, missing = ghaw_setup.copy_sources(tmp_path / "mirror.git", tmp_path / "out2")
    assert sorted(copied) == ["deeper.cjs", "error_helpers.cjs", "trace_graders.cjs", "trajectory_graders.cjs"]
    assert (tmp_path / "out2" / "deeper.cjs").is_file() and not (tmp_path / "out2" / "unrelated.cjs").exists()


def test_setup_takes_a_folder_of_modules_and_says_whether_they_are_the_recorded_copies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    js = _fake_checkout(tmp_path / "work-tree")
    copied, _ = ghaw_setup.copy_sources(js, tmp_path / "out")  # the modules' own folder, not a checkout
    assert sorted(copied) == ["trace_graders.cjs", "trajectory_graders.cjs"]
    status = ghaw_setup.recorded_status(tmp_path / "out")
    assert status.startswith("not the recorded copies: trace_graders.cjs, trajectory_graders.cjs differ")

    # Copies whose digests are the recorded ones are named so (the digests are checked, not the names).
    recorded = json.loads(ghaw_setup.RECORDED.read_text())["files"]
    fake = tmp_path / "recorded"
    fake.mkdir()
    for name in recorded:
        (fake / name).write_text("x")
    patched = {name: {**entry, "sha256": hashlib.sha256(b"x").hexdigest()} for name, entry in recorded.items()}
    record = tmp_path / "sources.json"
    record.write_text(json.dumps({"files": patched}))
    monkeypatch.setattr(ghaw_setup, "RECORDED", record)
    assert ghaw_setup.recorded_status(fake) == "the recorded copies (bench/gh-aw-sources.json)"
    (fake / "trajectory_graders.cjs").write_text("y")
    assert ghaw_setup.recorded_status(fake).endswith("trajectory_graders.cjs differ from bench/gh-aw-sources.json")
