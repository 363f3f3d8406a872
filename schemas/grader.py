"""One grader's description, the one type the registry, the plan, normalization, the manifest and
the rows all use (docs/reference/graders.md §3 for the manifest's keys).

Two words, two meanings: a grader's **source** is gh-aw's manifest word for where its code comes
from (``builtin``, ``inline``, ``operational-value``); its **family** is the group of graders one
implementation module registers and one pipeline step grades (``builtin`` = gh-aw's ten,
``trajectory``, ``inline``, ``operational-value``, …). A family defaults to the grader's source.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from pydantic import ConfigDict

Source = Literal["builtin", "inline", "operational-value"]
Direction = Literal["higher_is_better", "lower_is_better"]


@dataclass(frozen=True)
class GraderDescription:
    """What a grader is, independent of where it runs: the manifest's metadata plus its revision."""

    id: str
    name: str = ""
    description: str = ""
    unit: str = ""
    direction: str = ""  # a Direction, or "" when unknown (an inline grader may leave it out)
    threshold: float | None = None
    min: float | None = None
    max: float | None = None
    # Bumped whenever a registered implementation changes what it computes: part of the rows'
    # implementation digest and of the incremental state. 0: not a registered implementation
    # (an inline script or an evaluator, identified by its digest instead).
    revision: int = 0
    source: Source = "builtin"
    family: str = ""

    def __post_init__(self) -> None:
        if not self.family:
            object.__setattr__(self, "family", self.source)


def description_fields(desc: GraderDescription) -> dict[str, Any]:
    """The description's own fields, to build a richer type (a manifest or plan entry) from it."""
    return {f.name: getattr(desc, f.name) for f in fields(GraderDescription)}


@dataclass(frozen=True, kw_only=True)
class ManifestEntry(GraderDescription):
    """One grader of ``grader_manifest.json``: the description plus what the manifest records about
    this use of it. ``schemas.documents.Manifest`` validates files against this same type."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    enabled: bool = True
    digest: str = ""
    run: str = ""
    inline: str = ""
    config: Any = None

    def manifest_entry(self) -> dict[str, Any]:
        """The entry as gh-aw writes it: fixed key order, empty optional keys omitted."""
        out: dict[str, Any] = {"id": self.id, "name": self.name or self.id}
        if self.description:
            out["description"] = self.description
        out["source"] = self.source
        out["enabled"] = self.enabled
        for key in ("unit", "direction"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        for key in ("threshold", "max", "min"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        for key in ("digest", "run", "inline"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.config:
            out["config"] = self.config
        return out
