"""`fleetgrade regrade --evidence-at`: observations on the sample fleet, idempotence, integrity, one run."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from graders.tables.parquet import decode_table, encode_table
from pipeline.cli import main
from pipeline.report.queries import collect
from pipeline.report.scope import Selection
from pipeline.tables import connect
from tests.conftest import REPO
from tests.helpers.beam import local_test_pipeline
from transforms.discover import DiscoverRuns
from transforms.prepare import DEAD
from transforms.regrade import DROPS, OBSERVATIONS, PrepareForRegrade, Regrade

FLEET = REPO / "examples" / "fleet"
DIET = FLEET / "daily-file-diet"
T1, T2 = "2026-12-01T00:00:00Z", "2026-12-15T00:00:00Z"
TAMPERED = "7100390"  # run_id % 11 == 0 in examples/make_fleet.py (and its attempt 2)
ATTAINMENT_DATE = "2026-11-28"  # the runs that froze the transitional (attainment) evaluator
QUIET = ["--log-level", "WARNING"]


def digests(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file() and not str(p.relative_to(root)).startswith(skip)
    }


def regraded_runs() -> int:
    """Run folders with an archived evaluator whose digests verify (all but the tampered ones)."""
    return sum(1 for r in DIET.glob("run-71*") if not r.name.startswith(f"run-{TAMPERED}"))


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A graded output, then one regrade at T1; with the digests of the graded files."""
    out = tmp_path_factory.mktemp("regrade") / "out"
    assert main(["run", "--input", str(FLEET), "--output", str(out), *QUIET]) == 0
    before = digests(out)
    assert main(["regrade", "--input", str(FLEET), "--output", str(out), "--evidence-at", T1, *QUIET]) == 0
    return out, before


def test_regrade_adds_observations_and_leaves_original_tables_alone(graded):
    out, before = graded
    # dead_letter included: a run that cannot be prepared is the row `run` wrote, byte for byte.
    assert digests(out, ("observations/",)) == digests_outside(before)
    con = connect(str(out))
    rows = con.execute("SELECT count(*), count(DISTINCT (run_id, attempt)) FROM observations "
                       "WHERE status <> 'error'").fetchone()
    assert rows == (regraded_runs(), regraded_runs())
    assert {p.parent.parent.name for p in (out / "observations").rglob("*.parquet")} == {"workflow=daily-file-diet"}
    # One row per input, as `run` left it: 4 runs that cannot be prepared, and no second copy.
    assert con.execute("SELECT stage, count(*) FROM dead_letter GROUP BY ALL").fetchall() == [("prepare", 4)]
    assert collect(str(out), Selection()).overview["dead"] == 4


def digests_outside(all_digests: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in all_digests.items() if not k.startswith("observations/")}


def test_same_regrade_twice_is_byte_identical(graded):
    out, _ = graded
    first = digests(out)
    assert main(["regrade", "--input", str(FLEET), "--output", str(out), "--evidence-at", T1, *QUIET]) == 0
    assert digests(out) == first
    assert not list(out.rglob("_staging*"))


def test_another_evidence_time_adds_rows(graded, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(graded[0], out)
    assert main(["regrade", "--input", str(FLEET), "--output", str(out), "--evidence-at", T2, *QUIET]) == 0
    con = connect(str(out))
    per_time = dict(con.execute("SELECT strftime(evidence_at, '%Y-%m-%d'), count(*) FROM observations "
                                "WHERE status <> 'error' GROUP BY ALL").fetchall())
    assert per_time == {"2026-12-01": regraded_runs(), "2026-12-15": regraded_runs()}
    # By T2 every attainment case has matured (seven days after the run); at T1 none had.
    mature = dict(con.execute(f"SELECT strftime(evidence_at, '%Y-%m-%d'), bool_and(mature) FROM observations "
                              f"WHERE date = '{ATTAINMENT_DATE}' GROUP BY ALL").fetchall())
    assert mature == {"2026-12-01": False, "2026-12-15": True}


def test_a_tampered_run_is_an_error_observation(graded):
    con = connect(str(graded[0]))
    rows = con.execute("SELECT attempt, status, value, error, evaluator_digest, evidence_at FROM observations "
                       f"WHERE run_id = '{TAMPERED}' ORDER BY attempt").fetchall()
    assert [r[:3] for r in rows] == [(1, "error", None), (2, "error", None)]
    assert all(r[3].startswith("not regraded: operational-value evaluator digest mismatch: expected ")
               and r[3].split("expected ", 1)[1].startswith(r[4]) for r in rows)  # under the declared digest
    assert all(r[5].isoformat() == "2026-12-01T00:00:00+00:00" for r in rows)
    assert con.execute("SELECT count(*) FROM dead_letter WHERE stage = 'regrade'").fetchone()[0] == 0


def test_a_regrade_removes_the_second_copies_an_older_build_wrote(graded, tmp_path):
    """Older builds copied every unprepared run's dead letter under stage 'regrade' (4 rows became
    10 in the demo): the next regrade drops them and adds none."""
    out = tmp_path / "out"
    shutil.copytree(graded[0], out)
    for part in (out / "dead_letter").rglob("*.parquet"):
        rows = decode_table("dead_letter", part.read_bytes())
        part.write_bytes(encode_table("dead_letter", rows + [{**r, "stage": "regrade"} for r in rows],
                                      part.parent.parent.name.split("=", 1)[1]))
    assert connect(str(out)).execute("SELECT count(*) FROM dead_letter").fetchone()[0] == 8
    assert main(["regrade", "--input", str(FLEET), "--output", str(out), "--evidence-at", T1, *QUIET]) == 0
    assert connect(str(out)).execute("SELECT stage, count(*) FROM dead_letter GROUP BY ALL").fetchall() == [
        ("prepare", 4)]


def test_both_protocols(graded):
    con = connect(str(graded[0]))
    attainment = con.execute(
        "SELECT evidence_cutoff, matures_at, provenance, opportunity_key, \"case\", metrics, value, "
        f"baseline_value, delta_from_baseline FROM observations WHERE date = '{ATTAINMENT_DATE}'").fetchall()
    assert attainment and all(r[0] is not None and r[1] is not None and r[3] and r[5] is None for r in attainment)
    # The case is the original result's, passed back by the evaluator; the baseline is the original's.
    assert {r[4] for r in attainment} == {'{"maxFileLines":500,"target":"src/"}'}
    numeric = [r for r in attainment if r[6] is not None]
    assert numeric and all(json.loads(r[2])[0]["kind"] == "workflow-run" for r in numeric)
    assert all(r[7] == 0.5 and r[8] == r[6] - 0.5 for r in numeric)
    metric_rows = con.execute(
        "SELECT metrics, evidence_cutoff, provenance FROM observations "
        f"WHERE date <> '{ATTAINMENT_DATE}' AND status <> 'error'").fetchall()
    assert metric_rows and all(len(m) == 2 and c is None and p is None for m, c, p in metric_rows)


def test_final_log_line_counts_every_run(tmp_path, caplog):
    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger="fleetgrade"):
        assert main(["regrade", "--input", str(FLEET), "--output", str(out), "--evidence-at", T1]) == 0
    discovered = len({p.parent.relative_to(FLEET).parts[:2] for p in FLEET.rglob("*")
                      if p.is_file() and p.parent != FLEET})
    regraded = regraded_runs()
    skipped = discovered - 4 - len(list(DIET.glob("run-71*")))
    line = (f"{discovered} run(s) discovered, {regraded} regraded, {skipped} skipped (no archived evaluator), "
            f"{2 + 4} failed")
    assert any(line in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert sorted(p.name for p in out.iterdir()) == ["dead_letter", "observations"]


def test_one_run_json(capsys):
    run = DIET / "run-7100213"
    before = digests(run)
    assert main(["regrade", str(run), "--evidence-at", "2026-08-30T12:00:00Z", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run_id"] == "7100213" and doc["evidence_at"] == "2026-08-30T12:00:00Z"
    # Before the run existed the evaluator has no evidence: null, never 0.
    assert doc["value"] is None and doc["status"] == "unavailable" and doc["provenance"] == []
    assert doc["case"] == {"maxFileLines": 500, "target": "src/"} and doc["mature"] is False
    assert digests(run) == before


def test_one_run_integrity_failure_is_an_input_mistake(capsys):
    assert main(["regrade", str(DIET / f"run-{TAMPERED}"), "--evidence-at", T1, "--json"]) == 2
    err = capsys.readouterr().err
    assert f"run {TAMPERED} (" in err and "evaluator digest mismatch: expected" in err
    assert main(["regrade", str(FLEET / "ci-doctor" / "run-7100403"), "--evidence-at", T1, "--json"]) == 2
    assert "no archived operational-value evaluator" in capsys.readouterr().err
    assert main(["regrade", str(DIET / "run-7100213"), "--evidence-at", "2026-12-01", "--json"]) == 2
    assert main(["regrade", "--input", str(FLEET), "--evidence-at", T1]) == 2
    assert "either RUN_DIR or both --input and --output" in capsys.readouterr().err


def test_missing_original_result_is_a_dead_letter(tmp_path, capsys):
    run = tmp_path / "run-7100320"
    shutil.copytree(DIET / "run-7100320", run)
    (run / "agent/graders/grader_results.json").unlink()
    assert main(["regrade", str(run), "--evidence-at", T1]) == 2
    assert "grader_results.json not found" in capsys.readouterr().err


def test_regrade_dofn_on_a_tiny_fleet(tmp_path):
    fleet = tmp_path / "fleet"
    for rel in ("daily-file-diet/run-7100213", "daily-file-diet/run-7100320", f"daily-file-diet/run-{TAMPERED}",
                "ci-doctor/run-7100403"):
        shutil.copytree(FLEET / rel, fleet / rel)
    before = digests(fleet)
    base = str(fleet)
    with local_test_pipeline() as p:
        prepared = (p | DiscoverRuns(base)
                    | beam.ParDo(PrepareForRegrade(base)).with_outputs(DEAD, main="runs"))
        out = prepared.runs | beam.ParDo(Regrade(T1)).with_outputs(DROPS, main=OBSERVATIONS)
        assert_that(out[OBSERVATIONS] | "Obs" >> beam.Map(lambda r: (r["run_id"], r["status"], r.get("matures_at") is None)),
                    equal_to([("7100213", "pass", False), ("7100320", "pass", True), (TAMPERED, "error", True)]),
                    label="observations")
        # Every run clears the stage 'regrade' dead letter an older build may have written.
        assert_that(out[DROPS] | "Drops" >> beam.Map(lambda d: (d[0], d[3][1])),
                    equal_to([("dead_letter", "regrade")] * 4), label="drops")
    assert digests(fleet) == before
