"""A `gh aw logs` download mapped back to the artifact root the in-job grader read.

The reference-compatible graders must see exactly the files gh-aw's preprocessor saw in the job
(docs/reference/graders.md §5, rooted at ``/tmp/gh-aw/``). Downloads keep some of them elsewhere (docs/formats.md
§1.2): older agent artifacts keep the ``tmp/gh-aw/`` prefix, the conclusion job's ``usage``
artifact holds copies (``usage/agent_usage.json``, ``usage/graders/``, ``usage/evals.jsonl``,
``usage/agent/token_usage.jsonl``), and AWF's audit logs are a separate ``firewall-audit-logs``
artifact. :func:`artifact_root_paths` is the one place that says where each of them belongs;
``graders.runs.runfiles.RunFiles`` applies it to every run's listing, so every reader sees
artifact-root paths. Everything not mapped keeps its own name (``usage/detection/…`` is the
detection phase, never the agent's, and ``usage/aw_session.jsonl`` was written after the graders
ran: neither has an artifact-root place).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

# The agent artifact as uploaded by older gh-aw (absolute ``/tmp/gh-aw/`` prefix kept), bare or in
# its artifact folder (``agent``, legacy ``agent-artifacts``) when `gh aw logs` did not flatten it.
AGENT_PREFIXES: Final = ("tmp/gh-aw/", "agent/tmp/gh-aw/", "agent-artifacts/tmp/gh-aw/", "agent-artifacts/")

# Exact files of the ``usage`` artifact and where the job had them (collect_usage_artifact_files.sh).
USAGE_FILES: Final = {
    "usage/agent_usage.json": "agent_usage.json",
    "usage/evals.jsonl": "evals.jsonl",
}
# Folders moved as a whole: the usage mirror of the graders' files, AWF's separate audit artifact.
FOLDER_MOVES: Final = (
    ("usage/graders/", "agent/graders/"),
    ("firewall-audit-logs/", "sandbox/firewall-audit-logs/"),
)

# docs/reference/graders.md §5's token-usage candidates, in its order.
SANDBOX_TOKEN_USAGE: Final = (
    "sandbox/firewall-audit-logs/api-proxy-logs/token-usage.jsonl",
    "sandbox/firewall/audit/api-proxy-logs/token-usage.jsonl",
    "sandbox/firewall/logs/api-proxy-logs/token-usage.jsonl",
)
# The usage artifact's copy of whichever sandbox file it found (last copied wins, §5's last
# candidate): only a stand-in when the run has none of the sandbox files themselves.
USAGE_TOKEN_USAGE: Final = "usage/agent/token_usage.jsonl"


def _plain(rel: str) -> bool:
    """A relative path with no empty, ``.`` or ``..`` part: the only kind that is ever moved."""
    return bool(rel) and all(part not in ("", ".", "..") for part in rel.split("/"))


def _usage_target(rel: str) -> str | None:
    if rel in USAGE_FILES:
        return USAGE_FILES[rel]
    for src, dst in FOLDER_MOVES:
        if rel.startswith(src) and len(rel) > len(src):
            return dst + rel[len(src):]
    return None


def _target(rel: str) -> tuple[int, str] | None:
    """(priority, artifact-root path) for a download-only path, lower priority first; None if the
    path is no download-only path. The agent artifact outranks the usage copies of its files."""
    for rank, prefix in enumerate(AGENT_PREFIXES):
        if rel.startswith(prefix) and len(rel) > len(prefix):
            inner = rel[len(prefix):]
            return rank, _usage_target(inner) or inner
    usage = _usage_target(rel)
    return (len(AGENT_PREFIXES), usage) if usage is not None else None


# Every path this module moves starts with one of these: a listing with none is kept as listed.
_MOVED_PREFIXES: Final = (*AGENT_PREFIXES, *USAGE_FILES, *(src for src, _ in FOLDER_MOVES), USAGE_TOKEN_USAGE)


def artifact_root_paths(listed: Iterable[str]) -> dict[str, str]:
    """Artifact-root path -> listed path, for every listed path (a pure function of the names).

    A listed path that already is an artifact-root path keeps its name and wins over any
    download copy of it; a copy that loses (or whose place is taken by a better copy) keeps its
    own name too, so nothing is hidden and no two listed paths share a name.
    """
    names = list(dict.fromkeys(listed))
    if not any(rel.startswith(_MOVED_PREFIXES) for rel in names):  # a run as the job had it
        return dict(zip(names, names, strict=True))
    return _mapped(names)


def _mapped(names: list[str]) -> dict[str, str]:
    """``artifact_root_paths`` of distinct names, whatever they hold."""
    taken = set(names)  # a listed name is never given to another file
    out: dict[str, str] = {}
    moves: list[tuple[int, str, str]] = []
    for rel in names:
        target = _target(rel) if _plain(rel) else None
        if target is None:
            out[rel] = rel
        else:
            moves.append((target[0], rel, target[1]))
    kept: list[str] = []
    for _, rel, dst in sorted(moves):
        if dst in taken or dst in out:
            kept.append(rel)
        else:
            out[dst] = rel
    for rel in kept:
        out[rel] = rel
    token = out.get(USAGE_TOKEN_USAGE)
    if token == USAGE_TOKEN_USAGE and not any(p in out for p in SANDBOX_TOKEN_USAGE):
        del out[USAGE_TOKEN_USAGE]
        out[SANDBOX_TOKEN_USAGE[2]] = token
    return out
