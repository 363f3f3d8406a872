"""The grader manifest, ``grader_manifest.json`` (docs/reference/graders.md §3), as pydantic models.

The ``graders:`` configuration itself is validated by ``graders.grading.config`` with gh-aw's exact error
messages (pydantic's own messages would differ); these models read manifests back, e.g. from
downloaded run artifacts, and document the contract.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ManifestEntry(BaseModel):
    """One grader of the manifest; optional keys are absent when empty."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9-]{0,63}$")
    name: str
    description: str | None = None
    source: Literal["builtin", "inline", "operational-value"]
    enabled: bool
    unit: str | None = None
    direction: Literal["higher_is_better", "lower_is_better"] | None = None
    threshold: float | None = None
    max: float | None = None
    min: float | None = None
    digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    run: str | None = None
    inline: str | None = None
    config: dict[str, Any] | None = None

    def manifest_entry(self) -> dict[str, Any]:
        """Back to gh-aw's key order, empty keys omitted."""
        return self.model_dump(exclude_none=True)


class GraderManifest(BaseModel):
    """``{"version": 1, "graders": [...]}``: enabled graders first, then disabled ones."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    version: Literal[1]
    graders: list[ManifestEntry]
