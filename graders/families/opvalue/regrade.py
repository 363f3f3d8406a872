"""The pure core of ``fleetgrade regrade --evidence-at T`` for one archived run.

It follows the older gh-aw ``graders operational-value <run-id> --evidence-at`` command (§10
"Older design"), without its GitHub download and Git checkout steps, which belong to the caller:

1. the run's archived evaluator must hash to its manifest's digest (``load_run_archive``);
2. the original ``grader_results.json`` must hold one operational-value result whose
   ``implementation.digest`` equals that digest, for the same run id;
3. the request is the newest one plus ``evidenceAt``, ``case`` (from the original observation,
   when the original result has one) and ``run.createdAt``; the evaluator runs once, with no mode
   arguments (the newest contract; the old ``--definition``/``--grade-run`` calls are gone, so a
   baseline comes from the original result's ``baselineValue`` or from the caller);
4. the output may follow either protocol (``graders.families.opvalue.output``).

Integrity failures (1, 2) and an unavailable sandbox raise :class:`OperationalValueError`: no
observation is recorded for an evaluator we could not trust or could not run. Failures of the
evaluator itself become an observation with status ``error``. The original files are only read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from graders.families.opvalue.errors import OperationalValueError, SandboxUnavailableError
from graders.families.opvalue.executor import encode_request
from graders.families.opvalue.freeze import (
    MANIFEST_FILENAME,
    RESULTS_FILENAME,
    ArchivedEvaluator,
    load_run_archive,
    read_archive_json,
    select_manifest_entry,
)
from graders.families.opvalue.output import Attainment, parse_output, parse_timestamp, raw_result
from graders.families.opvalue.request import RunSubject, build_regrade_request, normalized_attempt
from graders.families.opvalue.sandbox import SandboxOptions, run_evaluator
from graders.grading.engine import grade_one
from graders.grading.plan import PlanEntry
from graders.grading.registry import GraderContext
from graders.jsrt.jsonio import is_finite_number
from graders.runs.runfiles import RunFiles
from schemas.version import FLEETGRADE_VERSION

GRADER_ID = "operational-value"


def _json_text(value: Any) -> str | None:
    """Deterministic JSON text for the table's JSON columns (keys sorted)."""
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def select_original_result(results: Any, run_id: str) -> dict[str, Any]:
    """The single operational-value result of the original ``grader_results.json``."""
    if not isinstance(results, dict) or not isinstance(results.get("results"), list):
        raise OperationalValueError("grader results are malformed")
    recorded = results.get("run", {}).get("id") if isinstance(results.get("run"), dict) else None
    if recorded not in (None, "", run_id):
        raise OperationalValueError(f"grader artifact run identity does not match run {run_id}")
    matches = [r for r in results["results"] if isinstance(r, dict) and r.get("id") == GRADER_ID]
    if len(matches) > 1:
        raise OperationalValueError(f"run {run_id} grader artifact contains duplicate operational-value results")
    if not matches:
        raise OperationalValueError(f"run {run_id} has no operational-value result to regrade")
    return matches[0]


def verify_provenance(archive: ArchivedEvaluator, original: dict[str, Any], run_id: str) -> None:
    """The manifest digest, the result's implementation digest and the evaluator bytes must agree."""
    implementation = original.get("implementation")
    result_digest = implementation.get("digest") if isinstance(implementation, dict) else None
    manifest_digest = archive.entry.get("digest")
    if not manifest_digest or not result_digest or manifest_digest != result_digest:
        raise OperationalValueError(f"run {run_id} has inconsistent operational-value evaluator provenance")
    if archive.digest != manifest_digest:  # load_run_archive already checked; kept as the invariant
        raise OperationalValueError(
            f"operational-value evaluator digest mismatch: expected {manifest_digest}, got {archive.digest}"
        )


def _entry(entry: dict[str, Any], digest: str) -> PlanEntry:
    """The archived manifest entry as the plan entry the engine grades (and normalizes) with."""
    threshold = entry.get("threshold")
    return PlanEntry(
        id=GRADER_ID,
        name=str(entry.get("name") or GRADER_ID),
        unit=str(entry.get("unit") or ""),
        direction=str(entry.get("direction") or ""),
        threshold=threshold if is_finite_number(threshold) else None,
        source="operational-value",
        digest=digest,
    )


@dataclass
class _EvaluateOnce:
    """The engine's executor for one regrade: runs the archived evaluator once and keeps what it
    answered. An evaluator's failure (``OperationalValueError``) is the engine's to turn into an
    error result; anything else (no sandbox, a bug) is kept in ``escaped`` and raised after, since
    no observation is recorded for an evaluator that could not run."""

    evaluator: bytes
    request: bytes
    options: SandboxOptions | None
    evidence_at: str
    baseline: float | None
    parsed: Any = None
    escaped: Exception | None = field(default=None, repr=False)

    def __call__(self, entry: PlanEntry, trace: dict[str, Any], ctx: GraderContext) -> Any:
        try:
            stdout = run_evaluator(self.evaluator, self.request, self.options)
            self.parsed = parse_output(stdout, self.evidence_at, self.baseline)
            return raw_result(self.parsed)
        except SandboxUnavailableError as exc:
            self.escaped = exc
        except OperationalValueError:
            raise
        except Exception as exc:
            self.escaped = exc
        return None


@dataclass(frozen=True)
class RegradeRun:
    """One archived run: its files and its recorded metadata."""

    files: RunFiles
    subject: RunSubject
    workflow: str
    date: str  # YYYY-MM-DD, the run's partition date
    outputs: Any = None  # the preprocessed trace's ``artifacts``
    event: Any = None


def observation_key(record: dict[str, Any]) -> tuple[str, str, datetime]:
    """An observation's identity: (run id, evaluator digest, evidence-at)."""
    return record["run_id"], record["evaluator_digest"], record["evidence_at"]


def declared_digest(run: RegradeRun) -> str:
    """The evaluator digest the run's manifest declares ("" when it cannot be read)."""
    try:
        digest = select_manifest_entry(read_archive_json(run.files, MANIFEST_FILENAME, "grader manifest")[1]).get("digest")
    except OperationalValueError:
        return ""
    return digest if isinstance(digest, str) else ""


def error_observation(run: RegradeRun, evidence_at: str, error: BaseException) -> dict[str, Any]:
    """A regrade that could not run the evaluator (its archive does not verify, the original result
    is missing): an ``error`` observation saying why, under the digest the run declares. Nothing
    was measured: value and the attainment columns are null."""
    return {
        "workflow": run.workflow,
        "date": run.date,
        "run_id": run.subject.run_id,
        "attempt": int(normalized_attempt(run.subject.attempt)),
        "evaluator_digest": declared_digest(run),
        "evidence_at": parse_timestamp(evidence_at, "evidence-at"),
        "value": None,
        "status": "error",
        "message": None,
        "error": f"not regraded: {error}",
        "fleetgrade_version": FLEETGRADE_VERSION,
    }


def regrade(
    run: RegradeRun,
    evidence_at: str,
    options: SandboxOptions | None = None,
    baseline: float | None = None,
) -> dict[str, Any]:
    """Regrade ``run`` as of ``evidence_at``; returns one ``observations`` row (see module doc)."""
    at = parse_timestamp(evidence_at, "evidence-at")
    run_id = run.subject.run_id
    archive = load_run_archive(run.files)
    _, results = read_archive_json(run.files, RESULTS_FILENAME, "grader results")
    original = select_original_result(results, run_id)
    verify_provenance(archive, original, run_id)

    observation = original.get("observation")
    case = observation.get("case") if isinstance(observation, dict) else None
    case = case if isinstance(case, dict) else None
    if baseline is None and is_finite_number(original.get("baselineValue")):
        baseline = float(original["baselineValue"])
    request = build_regrade_request(run.subject, evidence_at, case=case, outputs=run.outputs,
                                    config=archive.entry.get("config"), event=run.event)
    entry = _entry(archive.entry, archive.digest)
    evaluate = _EvaluateOnce(archive.evaluator, encode_request(request), options, evidence_at, baseline)
    result = grade_one(entry, {}, GraderContext(), {entry.family: evaluate})
    if evaluate.escaped is not None:
        raise evaluate.escaped

    parsed = evaluate.parsed
    attained = parsed if isinstance(parsed, Attainment) else None
    metrics = result.get("metrics")
    return {
        "workflow": run.workflow,
        "date": run.date,
        "run_id": run_id,
        "attempt": int(normalized_attempt(run.subject.attempt)),
        "evaluator_digest": archive.digest,
        "evidence_at": at,
        "value": None if result["value"] is None else float(result["value"]),
        "status": result["status"],
        "message": result.get("message"),
        "error": result.get("error"),
        "metrics": [
            {"id": m["id"], "value": None if m["value"] is None else float(m["value"])} for m in metrics
        ] if isinstance(metrics, list) else None,
        "case": _json_text(attained.case if attained else case),
        "opportunity_key": attained.opportunity_key if attained else None,
        "evidence_cutoff": parse_timestamp(attained.evidence_cutoff, "evidenceCutoff") if attained else None,
        "matures_at": parse_timestamp(attained.matures_at, "maturesAt") if attained else None,
        "mature": attained.mature if attained else None,
        "provenance": _json_text(attained.provenance) if attained else None,
        "baseline_value": attained.baseline_value if attained else None,
        "delta_from_baseline": attained.delta_from_baseline if attained else None,
        "fleetgrade_version": FLEETGRADE_VERSION,
    }
