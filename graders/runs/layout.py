"""Where runs are in a fleet folder: the run root of each file (README.md, "A fleet folder").

A fleet is typically ``<prefix>/<workflow>/run-<id>/…``, ``<prefix>/run-<id>/…`` or
``<prefix>/<workflow>/<run-id>/…`` (optionally with a ``YYYY-MM-DD`` or ``date=…`` folder).
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Final

# Top-level names of a run's artifact root (gh-aw artifacts, flattened by `gh aw logs`).
ARTIFACT_NAMES: Final = frozenset(
    {
        "aw_info.json", "aw-info", "agent_output.json", "agent-output", "agent_usage.json",
        "mcp-logs", "sandbox", "agent", "usage", "graders", "evals.jsonl", "aw.patch",
        "safe-outputs", "safe_output.jsonl", "agent-stdio.log", "activation",
        # What `gh aw logs` adds (graders/runs/download_layout.py maps the folders to artifact-root paths).
        "agent-artifacts", "firewall-audit-logs", "agent-session.jsonl",
    }
)
# Where a run's grader files live: the agent artifact, a flattened download, the usage mirror
# (read by the operational-value family and the observed evidence reader).
GRADER_ARCHIVE_DIRS: Final = ("agent/graders", "graders", "usage/graders")
# An older agent artifact keeps the job's absolute prefix: ``tmp/gh-aw/`` is an artifact root.
TMP_PREFIX: Final = ("tmp", "gh-aw")
RUN_DIR = re.compile(r"^run-([0-9A-Za-z._-]+)$")
DATE_DIR = re.compile(r"^(?:date=)?(\d{4}-\d{2}-\d{2})$")


def run_root_of(rel_path: str) -> str | None:
    """The run folder a file belongs to (relative to the fleet root), or None for stray files."""
    parts = [p for p in rel_path.split("/") if p]
    if len(parts) < 2:
        return None
    for i, part in enumerate(parts[:-1]):
        if RUN_DIR.match(part):
            return "/".join(parts[: i + 1])
    for i in range(1, len(parts)):
        if artifact_top(parts[i:]):
            return "/".join(parts[:i])
    return None


# Files outside any gh-aw run folder that may be an agent session or trace of another format
# (graders/formats): each becomes runs of its own, or a dead letter saying why not. A ``.json``
# document or a ``.log`` (an engine's stdout kept as a file) is one only when a reader recognises
# it (``SNIFFED_SUFFIXES``): other JSON documents and logs beside runs are strays.
SESSION_SUFFIXES: Final = (".jsonl", ".json", ".ndjson", ".log")
SNIFFED_SUFFIXES: Final = (".json", ".log")
# A Claude Code session's subagent transcripts, ``<session>/subagents/agent-<id>.jsonl``, are read
# with ``<session>.jsonl`` beside ``<session>/``: they belong to the same group.
_SUBAGENT_FILE = re.compile(r"^(?:(?P<dir>.*)/)?[^/]+/subagents/agent-[^/]+\.jsonl$")


def session_root_of(rel_path: str) -> str | None:
    """The session group of a file outside every gh-aw run: the folder holding it (``""`` for
    the input's own top), or None for a file no session format uses (a README).

    Files of one folder form one group (its runs are its files' sessions), so discovery and
    ``list_run`` treat a group like a run folder: one element, one listing."""
    if not rel_path.endswith(SESSION_SUFFIXES):
        return None
    m = _SUBAGENT_FILE.match(rel_path)
    if m:
        return m.group("dir") or ""
    return rel_path.rpartition("/")[0]


def artifact_top(parts: list[str]) -> bool:
    """Whether a path's parts (relative to a run folder) start with a gh-aw artifact name."""
    return bool(parts) and (parts[0] in ARTIFACT_NAMES or (tuple(parts[:2]) == TMP_PREFIX and len(parts) > 2))


# The run dates fleetgrade grades (graders/runs/runmeta.py says why these).
FIRST_DATE: Final = "1970-01-01"
LAST_DATE: Final = "2199-12-31"


def real_date(text: str) -> bool:
    """Whether ``YYYY-MM-DD`` text is a calendar date (``0000-00-00`` and ``2026-13-45`` are not)
    that a run may have (``FIRST_DATE`` to ``LAST_DATE``)."""
    try:
        _dt.date.fromisoformat(text)
    except ValueError:
        return False
    return FIRST_DATE <= text <= LAST_DATE


def not_a_date_folder(run_root: str) -> str | None:
    """The first folder above the run that looks like ``YYYY-MM-DD`` but is no calendar date."""
    for part in [p for p in run_root.split("/") if p][:-1]:
        d = DATE_DIR.match(part)
        if d and not real_date(d.group(1)):
            return part
    return None


def layout_hints(run_root: str) -> tuple[str | None, str | None, str | None]:
    """(workflow, run id, date) suggested by the path of a run root, each None if absent."""
    parts = [p for p in run_root.split("/") if p]
    if not parts:
        return None, None, None
    leaf = parts[-1]
    m = RUN_DIR.match(leaf)
    run_id = m.group(1) if m else leaf
    date = None
    workflow = None
    for part in reversed(parts[:-1]):
        d = DATE_DIR.match(part)
        if d and date is None:
            # A folder that is no calendar date is no date: never an invalid ``date=`` partition.
            date = d.group(1) if real_date(d.group(1)) else None
            continue
        if workflow is None:
            workflow = part
            break
    return workflow, run_id, date
