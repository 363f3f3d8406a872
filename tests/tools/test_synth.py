"""``python -m tools.synth``: deterministic fleets, a heavy tail, malformed runs dead-lettered."""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.tables import connect
from tools.synth import (
    DEAD_KINDS,
    MALFORMED_KINDS,
    MANIFEST,
    SizeMix,
    SynthOptions,
    plan_fleet,
    sample_size,
)
from tools.synth import main as synth_main


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_gives_byte_identical_tree(tmp_path):
    for name in ("a", "b"):
        assert synth_main(["--runs", "30", "--seed", "5", "--out", str(tmp_path / name)]) == 0
    assert synth_main(["--runs", "30", "--seed", "6", "--out", str(tmp_path / "c")]) == 0
    a, b, c = (digests(tmp_path / n) for n in "abc")
    assert a == b
    assert a != c
    assert len(a) > 30 * 3


def test_refuses_a_non_empty_folder(tmp_path, capsys):
    (tmp_path / "x").write_text("keep me")
    assert synth_main(["--runs", "1", "--out", str(tmp_path)]) == 1
    assert "not empty" in capsys.readouterr().err


def test_layout_and_artifact_kinds(tmp_path):
    out = tmp_path / "fleet"
    assert synth_main(["--runs", "60", "--seed", "3", "--out", str(out)]) == 0
    fleet = json.loads((out / MANIFEST).read_text())["fleet"]
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    for e in fleet:
        wf, run = e["folder"].split("/")
        assert wf == e["workflow"]
        assert run.startswith(f"run-{e['run_id']}")
    # Every artifact kind of docs/reference/graders.md §5 appears somewhere in a 60-run fleet.
    for needle in ("token-usage.jsonl", "agent_usage.json", "mcp-logs/gateway.jsonl", "agent_output.json",
                   "copilot-session-state/events.jsonl", "evals.jsonl", "aw_info.json"):
        assert any(f.endswith(needle) for f in files), needle
    good = {e["folder"] for e in fleet if e["malformed"] is None}
    infos = [json.loads(p.read_bytes()) for p in out.rglob("aw_info.json")
             if str(p.relative_to(out)).rsplit("/aw", 1)[0] in good]
    dates = {i["created_at"][:10] for i in infos}
    assert len(dates) >= 3
    # GitHub numbers runs as they start: a later run id never has an earlier date.
    by_id = sorted((i["run_id"], i["run_attempt"], i["created_at"][:10]) for i in infos)
    assert [d for _, _, d in by_id] == sorted(d for _, _, d in by_id)
    assert any(e["attempt"] == 2 for e in fleet)
    assert {e["malformed"] for e in fleet if e["malformed"]} == set(MALFORMED_KINDS)


def test_reruns_and_shared_tasks():
    runs = plan_fleet(SynthOptions(runs=400, seed=1))
    reruns = [r for r in runs if r.attempt == 2]
    assert reruns and all(any(o.run_id == r.run_id and o.attempt == 1 and o.day == r.day for o in runs)
                          for r in reruns)
    assert [r.day for r in sorted(runs, key=lambda r: r.run_id)] == sorted(r.day for r in runs)
    assert len({r.day for r in runs}) == 5
    per_task = {}
    for r in runs:
        per_task.setdefault((r.workflow, r.issue), set()).add(r.run_id)
    assert max(len(ids) for ids in per_task.values()) >= 3  # several runs of one issue



def _shape(root: Path, folder: str) -> tuple[str, ...]:
    return tuple(sorted(str(p.relative_to(root / folder)) for p in (root / folder).rglob("*") if p.is_file()))


def test_shapes_every_repeats_run_shapes(tmp_path, capsys):
    """A fleet N times larger holds the same run shapes N times over: the run count alone differs."""
    out = tmp_path / "f"
    # Under 40 runs, a zero malformed rate means none (from 40 on, one of each kind at least).
    assert synth_main(["--runs", "32", "--seed", "4", "--shapes-every", "8", "--malformed-rate", "0",
                 "--rerun-rate", "0", "--medium-fraction", "0.5", "--out", str(out)]) == 0
    fleet = json.loads((out / MANIFEST).read_text())
    assert fleet["options"]["shapes_every"] == 8
    entries = fleet["fleet"]
    assert len({e["folder"] for e in entries}) == 32  # distinct runs (ids, folders) all the same
    assert {e["tier"] for e in entries[:8]} == {"small", "medium"}
    for i, e in enumerate(entries):
        first = entries[i % 8]
        assert e["tier"] == first["tier"]
        assert _shape(out, e["folder"]) == _shape(out, first["folder"])
        # The same records; only ids, dates and workflow names differ in length.
        assert abs(e["bytes"] - first["bytes"]) <= 0.05 * first["bytes"] + 200
    fresh = tmp_path / "g"
    assert synth_main(["--runs", "32", "--seed", "4", "--malformed-rate", "0", "--rerun-rate", "0",
                 "--medium-fraction", "0.5", "--out", str(fresh)]) == 0
    drawn = json.loads((fresh / MANIFEST).read_text())["fleet"]
    assert [e["tier"] for e in drawn[:8]] == [e["tier"] for e in entries[:8]]  # run i < N is unchanged
    assert [e["tier"] for e in drawn[8:]] != [e["tier"] for e in entries[8:]]
    assert synth_main(["--runs", "1", "--shapes-every", "-1", "--out", str(tmp_path / "h")]) == 2
    assert "--shapes-every must be >= 0" in capsys.readouterr().err

def test_size_sampler_is_heavy_tailed():
    rng = random.Random(42)
    sizes = [sample_size(rng, SizeMix()) for _ in range(5000)]
    lines = [s.gateway_filler + 2 * s.tool_calls for s in sizes]
    assert statistics.median(lines) < 100  # most runs are small
    assert max(lines) >= 10_000  # and a few log tens of thousands of lines
    assert max(s.token_records for s in sizes) >= 10_000
    top = sorted(lines, reverse=True)[: len(lines) // 50]
    assert sum(top) > 0.5 * sum(lines)  # the top 2% of runs hold most of the lines
    assert {s.tier for s in sizes} == {"small", "medium", "large"}


def test_near_limit_runs_are_rare_and_controlled():
    rng = random.Random(1)
    assert all(sample_size(rng).near_limit_bytes == 0 for _ in range(2000))  # off by default
    sizes = [sample_size(rng, near_limit_rate=0.01, max_file_mib=20) for _ in range(2000)]
    near = [s for s in sizes if s.tier == "near-limit"]
    assert 5 <= len(near) <= 60
    assert all(0.9 * 20 * 2**20 < s.near_limit_bytes <= 20 * 2**20 for s in near)
    capped = sample_size(random.Random(0), near_limit_rate=1.0, max_file_mib=80)
    assert capped.near_limit_bytes < 50 * 2**20  # never over gh-aw's 50 MiB file limit


def test_near_limit_file_size(tmp_path):
    out = tmp_path / "f"
    assert synth_main(["--runs", "2", "--seed", "0", "--near-limit-rate", "1", "--max-file-mib", "1",
                 "--malformed-rate", "0", "--out", str(out)]) == 0
    logs = [p.stat().st_size for p in out.rglob("mcp-logs/*.jsonl")]
    assert logs and all(0.8 * 2**20 < n < 1.1 * 2**20 for n in logs)


@pytest.mark.slow
def test_fleet_runs_through_the_pipeline(tmp_path):
    fleet_dir, out = tmp_path / "fleet", tmp_path / "out"
    assert synth_main(["--runs", "48", "--seed", "9", "--out", str(fleet_dir)]) == 0
    fleet = json.loads((fleet_dir / MANIFEST).read_text())["fleet"]
    assert main(["run", "--input", str(fleet_dir), "--output", str(out), "--log-level", "ERROR"]) == 0
    con = connect(str(out))
    dead = {r[0] for r in con.execute("SELECT input FROM dead_letter").fetchall()}
    expected_dead = {e["folder"] for e in fleet if e["expected"] == "dead_letter"}
    assert {e["malformed"] for e in fleet if e["expected"] == "dead_letter"} == set(DEAD_KINDS)
    assert {d.removeprefix(str(fleet_dir) + "/") for d in dead} == expected_dead
    graded = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert graded == len(fleet) - len(expected_dead)
    # Malformed lines in graded runs are skipped and counted, not lost silently.
    warned = con.execute("SELECT count(*) FROM runs WHERE len(warnings) > 0").fetchone()[0]
    assert warned >= 1


def test_a_planted_shift_changes_only_the_shifted_runs(tmp_path):
    base = ["--runs", "80", "--seed", "2", "--days", "10", "--malformed-rate", "0"]
    assert synth_main([*base, "--out", str(tmp_path / "a")]) == 0
    assert synth_main([*base, "--out", str(tmp_path / "b"), "--shift", "ci-doctor:tool-success-rate:2026-11-25:-0.5"]) == 0
    a, b = digests(tmp_path / "a"), digests(tmp_path / "b")
    changed = {k.split("/")[0] for k in a.keys() | b.keys() if a.get(k) != b.get(k) and k != MANIFEST}
    assert changed == {"ci-doctor"}
    manifest = json.loads((tmp_path / "b" / MANIFEST).read_text())
    assert manifest["options"]["shifts"] == ["ci-doctor:tool-success-rate:2026-11-25:-0.5"]
    first = next(e["folder"] for e in manifest["fleet"] if e["workflow"] == "ci-doctor")
    files = [k for k in a if k.startswith(first + "/")]
    assert files and all(a[k] == b.get(k) for k in files), "a run dated before the shift is as it was"


def _usage_records(root: Path, folder: str) -> list[dict]:
    return [json.loads(x) for f in sorted((root / folder).rglob("token-usage.jsonl"))
            for x in f.read_text().splitlines() if '"_schema"' in x]  # AWF's records (not a stale copy's)


def test_a_planted_spend_jump_multiplies_only_the_shifted_runs_credits(tmp_path):
    base = ["--runs", "80", "--seed", "2", "--days", "10", "--malformed-rate", "0"]
    assert synth_main([*base, "--out", str(tmp_path / "a")]) == 0
    assert synth_main([*base, "--out", str(tmp_path / "b"), "--shift", "ci-doctor:ai-credits:2026-11-25:2"]) == 0
    a, b = digests(tmp_path / "a"), digests(tmp_path / "b")
    changed = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k) and k != MANIFEST}
    assert changed and all(k.startswith("ci-doctor/") and k.endswith(("token-usage.jsonl", "agent_usage.json"))
                           for k in changed)
    for folder in sorted({k.rsplit("/sandbox", 1)[0].removesuffix("/agent_usage.json") for k in changed}):
        info = json.loads((tmp_path / "a" / folder / "aw_info.json").read_text())
        assert info["created_at"] >= "2026-11-25"
        before, after = _usage_records(tmp_path / "a", folder), _usage_records(tmp_path / "b", folder)
        assert [{k: v for k, v in r.items() if not k.startswith("ai_credits")} for r in before] == \
            [{k: v for k, v in r.items() if not k.startswith("ai_credits")} for r in after]  # same calls and tokens
        for x, y in zip(before, after, strict=True):
            assert y["ai_credits_this_response"] == pytest.approx(2 * x["ai_credits_this_response"], abs=2e-6)


def test_token_records_are_billed_as_awf_bills_them(tmp_path):
    assert synth_main(["--runs", "60", "--seed", "4", "--days", "4", "--malformed-rate", "0", "--out",
                       str(tmp_path / "f")]) == 0
    records, runs = [], 0
    for usage in sorted((tmp_path / "f").rglob("agent_usage.json")):
        run = usage.parent
        recs = [json.loads(x) for f in run.rglob("token-usage.jsonl") for x in f.read_text().splitlines()
                if '"_schema"' in x]
        if not recs:
            continue
        runs += 1
        records += recs
        doc = json.loads(usage.read_text())
        for key in ("output_tokens", "cache_read_tokens", "cache_write_tokens"):
            assert doc[key] == sum(int(r[key]) for r in recs), key  # gh-aw's sums, router included
        if "ai_credits" in doc:
            totals = [r["ai_credits_total"] for r in recs]
            assert doc["ai_credits"] == totals[-1] == pytest.approx(sum(r["ai_credits_this_response"] for r in recs))
    assert runs > 30
    assert len({r["model"] for r in records}) >= 4  # the workflows' models, subagents' and the router's
    claude = [r for r in records if r["model"].startswith("claude") and r["cache_read_tokens"]]
    gpt = [r for r in records if r["model"].startswith("gpt") and r["cache_read_tokens"]]
    assert claude and all(r["cache_read_tokens"] + r["cache_write_tokens"] > int(r["input_tokens"]) for r in claude)
    assert gpt and all(int(r["input_tokens"]) >= r["cache_read_tokens"] for r in gpt)  # OpenAI counts it inside
    assert any(r.get("reasoning_tokens") for r in records if r["model"] == "gpt-5")
    assert any(r.get("purpose") == "routing_classification" for r in records)
    assert sum("ai_credits_this_response" in r for r in records) / len(records) > 0.85  # but a few older proxies


def test_a_fleet_without_credit_fields(tmp_path):
    assert synth_main(["--runs", "20", "--seed", "4", "--credit-rate", "0", "--out", str(tmp_path / "f")]) == 0
    texts = [p.read_text(errors="replace") for p in (tmp_path / "f").rglob("*.json*")]
    assert texts and not any("ai_credits" in t for t in texts)


@pytest.mark.parametrize("shift", ["ci-doctor:tool-success-rate:2026-11-25", "nope:retries:2026-11-25:0.1",
                                   "ci-doctor:loops:2026-11-25:0.1", "ci-doctor:retries:2026-13-01:0.1",
                                   "ci-doctor:retries:2026-11-25:2", "ci-doctor:ai-credits:2026-11-25:0",
                                   "ci-doctor:ai-credits:2026-11-25:-2", "ci-doctor:ai-credits:2026-11-25:5000"])
def test_a_bad_shift_is_a_usage_error(tmp_path, capsys, shift):
    assert synth_main(["--runs", "5", "--out", str(tmp_path / "x"), "--shift", shift]) == 2
    assert capsys.readouterr().err.startswith("python -m tools.synth: --shift ")
    assert not (tmp_path / "x").exists()


def test_fleetgrade_synth_runs_the_checkout_s_generator(tmp_path):
    """The generator is not in the package (pyproject excludes tools/); from a checkout the
    documented command still writes the same tree."""
    import subprocess
    import sys

    exe = str(Path(sys.executable).parent / "fleetgrade")
    args = ["--runs", "4", "--seed", "2", "--out"]
    r = subprocess.run([exe, "synth", *args, str(tmp_path / "cli")], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert synth_main([*args, str(tmp_path / "tool")]) == 0
    assert digests(tmp_path / "cli") == digests(tmp_path / "tool")
    bad = subprocess.run([exe, "synth", "--runs", "-1", "--out", str(tmp_path / "x")], capture_output=True,
                         text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.strip().endswith("--runs must be >= 0")


def test_the_package_does_not_ship_the_repository_tools():
    import tomllib

    from tests.conftest import REPO

    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert "tools*" in find["exclude"] and not any(p.startswith("tools") for p in find["include"])


@pytest.mark.parametrize(("argv", "said"), [
    (["--rnus", "4", "--out", "x"], "unknown flag --rnus; did you mean --runs?"),
    (["--run", "4", "--out", "x"], "unknown flag --run; did you mean --runs?"),  # no abbreviations
    (["--runs=x", "--out", "x"], "argument --runs: invalid int value: 'x'"),
    (["--out", "x"], "the following arguments are required: --runs"),
])
def test_a_mistake_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, argv, said):
    monkeypatch.chdir(tmp_path)
    assert synth_main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"python -m tools.synth: {said}\n"
    assert not (tmp_path / "x").exists()
