"""GitHub Copilot CLI session ``events.jsonl`` (spec §9): the parser moved to the input-format
seam, ``graders/formats/copilot.py``; re-exported here for the trace rules' callers."""

from __future__ import annotations

from graders.formats.copilot import runs_from_copilot_events

__all__ = ["runs_from_copilot_events"]
