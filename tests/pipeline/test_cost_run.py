"""Spend through the executables (issue 44's "done when"): a synthetic fleet with a planted 2×
spend jump on one workflow; `check --grader ai-credits` gates on it, the report's cost section
shows it, `cost_outliers` lists the planted runs; an incremental run writes the bytes a fresh one
does; a fleet whose proxy states no credits has no ai-credits (never 0)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.tables import connect
from tests.conftest import REPO

pytestmark = pytest.mark.slow

FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")
SHIFT_DATE = "2026-12-04"
FACTOR = "1.5"  # a 2× jump against a 2× threshold would list half the planted runs by construction


def fleetgrade(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLEETGRADE, *args], cwd=REPO, capture_output=True, text=True, timeout=900, check=False)


def synth(out: Path, *extra: str) -> None:
    # Small runs of similar size (a spread of 0.1): a run's spend varies by about 15%, as runs of
    # one workflow doing one job do; the planted jump doubles every call's credits.
    done = subprocess.run([sys.executable, "-m", "tools.synth", "--runs", "300", "--days", "21", "--seed", "11",
                           "--medium-fraction", "0", "--large-fraction", "0", "--malformed-rate", "0",
                           "--size-spread", "0.1", "--out", str(out), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr


def run(fleet: Path, out: Path, *extra: str) -> None:
    done = fleetgrade("run", "--input", str(fleet), "--output", str(out), "--log-level", "ERROR",
                      "--outlier-factor", FACTOR, *extra)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("spend")
    synth(root / "fleet", "--shift", f"ci-doctor:ai-credits:{SHIFT_DATE}:2")
    run(root / "fleet", root / "out")
    return root / "fleet", root / "out"


def test_check_gates_on_the_planted_spend_jump(planted: tuple[Path, Path]) -> None:
    _, out = planted
    done = fleetgrade("check", str(out), "--grader", "ai-credits", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    regressed = [r for r in json.loads(done.stdout)["rows"] if r["verdict"] == "regressed"]
    assert [(r["workflow"], r["change_date"]) for r in regressed] == [("ci-doctor", SHIFT_DATE)]
    assert 1.7 < regressed[0]["mean_current"] / regressed[0]["mean_baseline"] < 2.3
    text = fleetgrade("check", str(out), "--grader", "ai-credits").stdout
    assert "ci-doctor" in text and SHIFT_DATE in text and "regressed" in text


def test_cost_outliers_list_the_planted_runs(planted: tuple[Path, Path]) -> None:
    _, out = planted
    con = connect(str(out))
    planted_runs = {tuple(r) for r in con.execute(f"""
        SELECT run_id, attempt FROM runs WHERE workflow = 'ci-doctor' AND date >= DATE '{SHIFT_DATE}'
        AND ai_credits IS NOT NULL""").fetchall()}
    others = con.execute(f"""SELECT count(*) FROM runs WHERE NOT (workflow = 'ci-doctor' AND date >= DATE '{SHIFT_DATE}')
                             """).fetchall()[0][0]
    listed = con.execute("SELECT workflow, run_id, attempt, date, ratio, run_url, factor, window_days FROM cost_outliers"
                         ).fetchall()
    found = {(r[1], r[2]) for r in listed if r[0] == "ci-doctor" and str(r[3]) >= SHIFT_DATE}
    false = [r for r in listed if (r[1], r[2]) not in planted_runs]
    assert len(found) >= 0.9 * len(planted_runs), (len(found), len(planted_runs))
    assert len(false) <= 0.05 * others, (false, others)  # unplanted runs listed: within the FDR of 5%
    assert all(r[4] > 1.5 and r[5].startswith("https://github.com/octo-org/widgets/actions/runs/")
               and (r[6], r[7]) == (1.5, 14) for r in listed)


def test_the_report_shows_the_spend_rise(planted: tuple[Path, Path], tmp_path: Path) -> None:
    _, out = planted
    html = tmp_path / "report.html"
    assert fleetgrade("report", str(out), "--html", str(html)).returncode == 0
    page = html.read_text()
    section = page[page.index('<section id="cost"'):]
    section = section[:section.index("</section>")]
    assert 'data-metric="spend-line" data-state="rose"' in section
    assert "<b>ci-doctor</b>" in section and f"since {SHIFT_DATE}" in section
    assert 'data-metric="cost-outlier" data-workflow="ci-doctor"' in section
    assert 'data-metric="model-mix" data-model="claude-sonnet-4.5"' in section
    assert 'data-metric="daily-mean" data-workflow="ci-doctor" data-grader="ai-credits"' in section


def test_an_incremental_run_writes_the_bytes_of_a_fresh_one(planted: tuple[Path, Path], tmp_path: Path) -> None:
    fleet, fresh = planted
    out = tmp_path / "out"
    # The first week arrives late: its runs are in the windows of the 14 days after it, whose
    # stored verdicts are recomputed (and only theirs: later partitions are left as they are).
    run(fleet, out, "--since", "2026-11-27")
    run(fleet, out)
    for table in ("cost_outliers", "runs"):
        files = sorted(p.relative_to(fresh) for p in (fresh / table).rglob("*.parquet"))
        assert files and files == sorted(p.relative_to(out) for p in (out / table).rglob("*.parquet"))
        assert all((fresh / f).read_bytes() == (out / f).read_bytes() for f in files), table


def test_a_fleet_without_credit_fields_has_no_ai_credits_never_zero(tmp_path: Path) -> None:
    fleet, out = tmp_path / "fleet", tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "tools.synth", "--runs", "40", "--days", "3", "--seed", "5",
                           "--malformed-rate", "0", "--credit-rate", "0", "--out", str(fleet)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    run(fleet, out)
    con = connect(str(out))
    statuses = con.execute("""SELECT status, count(*), count(value) FROM grader_results
                              WHERE grader_id = 'ai-credits' GROUP BY ALL""").fetchall()
    assert statuses == [("unavailable", statuses[0][1], 0)]
    assert con.execute("SELECT count(ai_credits), count(tokens_input) > 0 FROM runs").fetchall() == [(0, True)]
    assert con.execute("SELECT count(*) FROM grader_results WHERE grader_id = 'tokens-input' AND value > 0"
                       ).fetchall()[0][0] > 0
    gate = fleetgrade("check", str(out), "--grader", "ai-credits")  # nothing to test: never a pass
    assert gate.returncode == 5 and "never graded" in gate.stderr, gate.stderr
