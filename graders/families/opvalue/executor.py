"""The engine's executor for ``source: operational-value`` (docs/reference/graders.md §4 steps 5 and 7, §10).

The step takes the run subject from live ``GITHUB_*`` variables. Here one executor serves many
archived runs, so it is bound to a run's recorded metadata with :meth:`for_run`; an executor
without a run subject fails like the step with no ``GITHUB_RUN_ID``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from graders.families.opvalue.freeze import ArchivedEvaluator, verify_archived
from graders.families.opvalue.output import parse_output, raw_result
from graders.families.opvalue.request import RunSubject, build_regrade_request, build_request
from graders.families.opvalue.sandbox import SandboxOptions, run_evaluator
from graders.grading.plan import PlanEntry
from graders.grading.registry import GraderContext, executor
from graders.jsrt.jscompat import js_stringify
from graders.jsrt.jsonio import is_finite_number


def encode_request(request: dict[str, Any]) -> bytes:
    """``JSON.stringify(request)`` as UTF-8 (lone surrogates become U+FFFD)."""
    return (js_stringify(request) or "null").encode("utf-8", "replace")


def entry_from_archive(archive: ArchivedEvaluator) -> PlanEntry:
    """A plan entry for grading a run with its own archived evaluator and manifest metadata."""
    e = archive.entry

    def text(key: str) -> str:
        return e[key] if isinstance(e.get(key), str) else ""

    def number(key: str) -> float | None:
        return e[key] if is_finite_number(e.get(key)) else None

    return PlanEntry(
        id=text("id") or "operational-value", name=text("name"), source="operational-value",
        enabled=e.get("enabled") is True, description=text("description"), unit=text("unit"),
        direction=text("direction"), threshold=number("threshold"), max=number("max"), min=number("min"),
        digest=text("digest"), run=text("run"), inline=text("inline"), config=e.get("config"),
        evaluator=archive.evaluator,
    )


@dataclass(frozen=True)
class OperationalValueExecutor:
    """Runs ``entry.evaluator`` in the sandbox after checking it against ``entry.digest``.

    ``evidence_at`` (UTC ISO) switches on the older attainment protocol and adds ``evidenceAt``,
    ``case`` and ``run.createdAt`` to the request; without it the request is the newest one.
    """

    options: SandboxOptions = field(default_factory=SandboxOptions)
    subject: RunSubject | None = None
    event: Any = None
    evidence_at: str | None = None
    case: Any = None
    baseline: float | None = None

    def for_run(self, subject: RunSubject, event: Any = None) -> OperationalValueExecutor:
        return replace(self, subject=subject, event=event)

    def request(self, entry: PlanEntry, trace: dict[str, Any]) -> dict[str, Any]:
        subject = self.subject or RunSubject(run_id="")
        outputs = trace.get("artifacts") if isinstance(trace, dict) else None
        if self.evidence_at is not None:
            return build_regrade_request(subject, self.evidence_at, case=self.case, outputs=outputs,
                                         config=entry.config, event=self.event)
        return build_request(subject, outputs=outputs, config=entry.config, event=self.event)

    def __call__(self, entry: PlanEntry, trace: dict[str, Any], ctx: GraderContext) -> Any:
        # The archive check comes first, as in the step: a tampered evaluator never runs.
        verify_archived(entry.evaluator or None, entry.digest or None)
        request = self.request(entry, trace)
        stdout = run_evaluator(entry.evaluator, encode_request(request), self.options)
        return raw_result(parse_output(stdout, self.evidence_at, self.baseline))


@executor("operational-value")
def operational_value_executor(allow_unsandboxed: bool = False) -> OperationalValueExecutor:
    """The operational-value family's sandbox (bubblewrap), one per worker; it fails closed unless
    ``allow_unsandboxed`` (``--allow-unsandboxed``) says otherwise."""
    return OperationalValueExecutor(options=SandboxOptions(allow_unsandboxed=allow_unsandboxed))
