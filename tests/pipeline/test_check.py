"""``fleetgrade check``: the regression gate, through the real executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipeline.cmd_check import UNTESTED_EXIT
from pipeline.stats_read import read_rows, recompute_regressions
from tests.conftest import REPO
from tests.helpers.demo import CHANGE_DATE, demo_root
from tests.pipeline.stats_fleet import SHIFT_DATE, shifted_output
from tests.pipeline.test_gcs import BUCKET, client, gcs_proxy, gcs_server  # noqa: F401 (fixtures)
from tools.gcs_server import free_port

__all__ = ["demo_root", "gcs_server", "shifted_output"]  # the fixtures
FLEETGRADE = Path(sys.executable).parent / "fleetgrade"


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FLEETGRADE), "check", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_planted_regression_fails_the_gate_worst_first(shifted_output: Path) -> None:
    done = check(str(shifted_output))
    assert done.returncode == 1, done.stderr
    header, first = done.stdout.splitlines()[:2]
    assert header.split()[:3] == ["workflow", "grader", "verdict"]
    assert first.split()[:3] == ["ci-doctor", "tool-success-rate", "regressed"]
    assert SHIFT_DATE in first  # the change point lands on the planted date


def test_json_rows_and_a_rise_is_not_a_regression(shifted_output: Path) -> None:
    done = check(str(shifted_output), "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    regressed = {(r["workflow"], r["grader_id"]) for r in doc["rows"] if r["verdict"] == "regressed"}
    assert ("ci-doctor", "tool-success-rate") in regressed
    assert {wf for wf, _ in regressed} == {"ci-doctor"}, "only the planted workflow is flagged"
    assert doc["regressed"] == len(regressed)


def test_filters_thresholds_and_windows(shifted_output: Path) -> None:
    out = str(shifted_output)
    assert check(out, "--workflow", "issue-triage").returncode == 0
    assert check(out, "--grader", "tool-success-rate").returncode == 1
    assert check(out, "--min-effect", "50").returncode == 0
    other = check(out, "--window", "5", "--baseline", "10", "--json")  # recomputed from the grades
    assert other.returncode == 1
    assert json.loads(other.stdout)["rows"][0]["baseline_days"] == 10


def test_bad_usage_exits_2_with_one_line(shifted_output: Path, tmp_path: Path) -> None:
    for args in ((str(tmp_path),), (str(shifted_output), "--fdr", "0"), (str(shifted_output), "--workflow", "nope")):
        done = check(*args)
        assert done.returncode == 2, args
        assert "fleetgrade check" in done.stderr and "Traceback" not in done.stderr


def test_a_misspelt_workflow_or_grader_gets_a_did_you_mean(shifted_output: Path) -> None:
    """Issue 42: a filter that matches nothing is a typo until shown otherwise, never an empty pass."""
    for flag, typo, meant in (("--workflow", "ci-docter", "ci-doctor"), ("--grader", "tool-sucess-rate",
                                                                         "tool-success-rate")):
        done = check(str(shifted_output), flag, typo)
        assert done.returncode == 2, done.stderr
        assert done.stderr == (f"fleetgrade check: {flag} {typo} has no regressions rows; did you mean {meant}? "
                               f"({shifted_output})\n"), done.stderr


def test_stored_rows_equal_a_recomputation(shifted_output: Path) -> None:
    stored = sorted(read_rows(str(shifted_output), "regressions"), key=lambda r: (r["workflow"], r["grader_id"]))
    again = recompute_regressions(str(shifted_output), 7, 28)
    assert [{k: v for k, v in r.items() if k != "fleetgrade_version"} for r in stored] == again


def test_check_does_not_import_beam() -> None:
    code = ("import sys, pipeline.cmd_check, pipeline.stats_read; "
            "sys.exit(any(m.startswith('apache_beam') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 0


def test_the_demo_fleet_fails_the_gate_on_its_planted_change(demo_root: Path) -> None:
    """`make demo` then `fleetgrade check demo-output`: the planted change, found and dated, and
    nothing else (examples/make_fleet.py plants it)."""
    out = demo_root / "demo-output"
    done = check(str(out), "--json")
    assert done.returncode == 1, done.stderr
    rows = json.loads(done.stdout)["rows"]
    regressed = {(r["workflow"], r["grader_id"]): r["change_date"] for r in rows if r["verdict"] == "regressed"}
    # the graders that count failed tool calls, and only in issue-triage, all dated on the change
    assert {("issue-triage", "tool-success-rate"), ("issue-triage", "tool-failure-count")} <= set(regressed)
    assert {wf for wf, _ in regressed} == {"issue-triage"} and set(regressed.values()) == {CHANGE_DATE}
    assert all("tool" in g for _, g in regressed)
    assert not [r for r in rows if r["verdict"] == "improved"]
    tested = {r["workflow"] for r in rows if r["verdict"] != "insufficient-data"}
    assert tested == {"issue-triage", "ci-doctor"}, "daily-file-diet is three days old: nothing to test yet"
    first = check(str(out)).stdout.splitlines()[1].split()
    assert first[0] == "issue-triage" and first[2] == "regressed" and first[-1] == CHANGE_DATE
    stats = read_rows(str(out), "grader_stats")
    assert {r["window_days"] for r in stats} == {1, 7, 28}
    assert {r["grader_id"] for r in stats} >= {"tool-success-rate", "trace:delivered"}


def test_a_gate_that_tested_nothing_does_not_pass(demo_root: Path) -> None:
    """daily-file-diet is three days old: no cell has a baseline, so the gate cannot say "no
    regression"; it says why in one line and exits 5, unless --allow-untested."""
    out = str(demo_root / "demo-output")
    doc = json.loads(check(out, "--workflow", "daily-file-diet", "--json").stdout)
    short = doc["untested"]
    assert doc["tested"] == 0 and short > 0
    done = check(out, "--workflow", "daily-file-diet")
    assert done.returncode == UNTESTED_EXIT == 5
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"fleetgrade check: nothing could be tested: {short} cell(s) need more history; "
                                  "the baseline window needs runs in the 28 days before the last 7")
    assert "the runs span 3 day(s)" in done.stderr and "--allow-untested" in done.stderr
    allowed = check(out, "--workflow", "daily-file-diet", "--allow-untested")
    assert allowed.returncode == 0
    assert f"0 regressed, 0 improved, 0 no-change, {short} insufficient-data" in allowed.stdout
    assert allowed.stderr.startswith("fleetgrade check: nothing could be tested")
    # A tested cell anywhere is a real answer: the whole demo exits 1 on its regression.
    assert check(out).returncode == 1


def test_cells_never_graded_are_counted_apart_not_told_to_wait(demo_root: Path) -> None:
    out = str(demo_root / "demo-output")
    done = check(out)
    table, _, summary = done.stdout.partition("\n\n")
    assert "trajectory-ndtw" not in table, "a grader unavailable on every run has no row"
    never = next(line for line in summary.splitlines() if "never graded" in line)
    assert "more runs will not change that" in never and "trajectory-ndtw" in never
    doc = json.loads(check(out, "--json").stdout)
    ids = {(c["workflow"], c["grader_id"]) for c in doc["never_graded"]}
    assert ("ci-doctor", "trajectory-ndtw") in ids
    assert not ids & {(r["workflow"], r["grader_id"]) for r in doc["rows"]}
    assert all(r["n_current"] or r["n_baseline"] for r in doc["rows"])


def test_change_dates_only_on_changed_rows_and_a_word_on_intervals(demo_root: Path) -> None:
    done = check(str(demo_root / "demo-output"))
    rows = [line.split() for line in done.stdout.split("\n\n")[0].splitlines()[1:]]
    for cells in rows:
        dated = cells[-1] != "-"
        assert dated == (cells[2] in ("regressed", "improved")), cells
    # the demo has no-change cells whose interval excludes 0 at q ≥ 0.05: the output says why
    assert "the interval is the cell's own, its q corrects for the" in done.stdout


def test_a_gcs_output_is_gated_on_its_stored_table(shifted_output: Path, gcs_server: str) -> None:
    """The nightly job writes to gs://: check reads its stored regressions (and only those)."""
    bucket = client().bucket(BUCKET)
    for path in sorted((shifted_output / "regressions").rglob("*.parquet")):
        bucket.blob(f"graded/{path.relative_to(shifted_output).as_posix()}").upload_from_filename(str(path))
    env = {**os.environ, "STORAGE_EMULATOR_HOST": gcs_server}
    remote = subprocess.run([str(FLEETGRADE), "check", f"gs://{BUCKET}/graded"], cwd=REPO, capture_output=True,
                            text=True, timeout=120, check=False, env=env)
    assert remote.returncode == 1, remote.stderr
    assert remote.stdout == check(str(shifted_output)).stdout
    other = subprocess.run([str(FLEETGRADE), "check", f"gs://{BUCKET}/graded", "--window", "5"], cwd=REPO,
                           capture_output=True, text=True, timeout=120, check=False, env=env)
    assert other.returncode == 2 and other.stderr.count("\n") == 1
    assert other.stderr.startswith("fleetgrade check: on gs:// only the windows")
    empty = subprocess.run([str(FLEETGRADE), "check", f"gs://{BUCKET}/nothing"], cwd=REPO, capture_output=True,
                           text=True, timeout=120, check=False, env=env)
    assert empty.returncode == 2 and "no regressions table" in empty.stderr


def test_gcs_mistakes_are_one_line(gcs_server: str, tmp_path: Path) -> None:
    """Issue 42: no credentials (the metadata server a closed loopback port: nothing leaves the
    machine) or no such bucket: one line naming the place and the problem, never a traceback."""
    bare = {k: v for k, v in os.environ.items()
            if k not in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT")}
    closed = f"127.0.0.1:{free_port()}"
    bare.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"), GCE_METADATA_HOST=closed,
                GCE_METADATA_IP=closed)
    for env, place, said in ((bare, "gs://some-bucket/graded", "no Google credentials found for gs://: run "),
                             ({**os.environ, "STORAGE_EMULATOR_HOST": gcs_server}, "gs://no-such-bucket/graded",
                              "the bucket does not exist (gs://no-such-bucket)")):
        done = subprocess.run([str(FLEETGRADE), "check", place], cwd=REPO, capture_output=True, text=True,
                              timeout=120, check=False, env=env)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"fleetgrade check: {said}"), done.stderr
