"""Pydantic models of the JSON documents fleetgrade reads and writes (gh-aw shapes).

The grading core works on plain dicts (the trace must round-trip byte-for-byte like gh-aw's
JSON); these models are the contracts those dicts are validated against in tests and at
the CLI boundary.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.grader import ManifestEntry

Status = Literal["pass", "fail", "error", "unavailable"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Implementation(_Closed):
    id: str
    version: int
    digest: str | None = None


class Metric(_Closed):
    id: str
    value: float | None


class GraderResult(_Closed):
    """One normalized result (docs/reference/graders.md §4)."""

    id: str
    name: str
    description: str | None = None
    value: float | None
    unit: str
    passed: bool | None
    status: Status
    source: str
    implementation: Implementation
    severity: Literal["error", "warning", "info", "note"] | None = None
    details: str | None = None
    message: str | None = None
    metrics: list[Any] | None = None
    diagnostics: dict[str, Any] | None = None
    error: str | None = None


class RunSummary(_Closed):
    id: str
    attempt: int
    graderCount: int
    passed: int
    failed: int
    errors: int


class EvalsSummary(_Closed):
    total: int
    yes: int
    no: int
    unknown: int
    byQuestion: dict[str, Literal["YES", "NO", "UNKNOWN"]]


class ResultsContext(_Closed):
    experiments: dict[str, Any] | None = None
    evals: EvalsSummary | None = None


class GraderResultsFile(_Closed):
    """``grader_results.json``."""

    version: Literal[1]
    run: RunSummary
    context: ResultsContext
    results: list[GraderResult]


class Manifest(_Closed):
    """``grader_manifest.json``."""

    version: Literal[1]
    graders: list[ManifestEntry]


class TokenStep(_Closed):
    index: int
    inputTokens: float
    outputTokens: float
    durationMs: float
    model: Any = None


class PreprocessedTrace(_Closed):
    """The preprocessed trace (``grader_payload.json``), docs/reference/graders.md §5, keys in this order."""

    tokenUsageEntries: list[Any]
    agentUsage: Any
    mcpGatewayEntries: list[Any]
    agentOutput: Any
    toolCalls: list[Any]
    nativeToolCalls: list[Any]
    gatewayRequests: list[Any]
    retryEvents: list[Any]
    errorEvents: list[Any]
    steps: list[TokenStep]
    totalInputTokens: float | None
    totalOutputTokens: float | None
    totalDurationMs: float | None
    totalRequests: int
    files: list[Any]
    artifacts: list[Any]


class AwInfo(_Open):
    """The documented keys of ``aw_info.json`` (the activation artifact); others are kept."""

    workflow_name: str | None = None
    run_id: int | str | None = None
    run_number: int | str | None = None
    run_attempt: int | str | None = None
    created_at: str | None = None
    repository: str | None = None
    engine_id: str | None = None
    engine_name: str | None = None
    model: str | None = None
    version: str | None = None
    cli_version: str | None = None
    staged: bool | None = None
    agent_runtime: str | None = None


class RunMeta(_Closed):
    """Identity of one run, as fleetgrade determined it."""

    workflow: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    attempt: int = Field(ge=1)
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    created_at: str | None = None
    repository: str | None = None
    metadata_source: Literal["aw_info", "layout", "file"]  # "file": a session file (graders/formats)
    root: str
