"""Sessions from a local file or folder, for ``fleetgrade trace --input``: the folder is read the
way ``fleetgrade run`` discovers one (graders/runs/layout.py): gh-aw run folders as the ``gh-aw``
format, every other ``.jsonl``/``.json``/``.ndjson`` file by the reader that recognises it, a
Claude Code session's ``subagents/`` files with their session.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from graders.formats import FormatError, Session, Source, get_format, read_file
from graders.formats.ghaw.reader import is_run_folder
from graders.runs.layout import run_root_of, session_root_of
from graders.runs.runfiles import local_run_files

Warn = Callable[[str], None]
# ``<session>/subagents/agent-<id>.jsonl`` anywhere below the input.
SUBAGENT_FILE = re.compile(r"^(?P<session>.+)/subagents/agent-[^/]+\.jsonl$")


def _related(folder: Path, rel: str, files: set[str]) -> dict[str, bytes]:
    """A Claude Code session's subagent files, relative to its folder."""
    stem = rel.removesuffix(".jsonl")
    base = rel.rpartition("/")[0]
    out: dict[str, bytes] = {}
    for f in sorted(files):
        if f.startswith(stem + "/subagents/"):
            out[f[len(base) + 1:] if base else f] = (folder / f).read_bytes()
    return out


def read_input(path: str, warn: Warn) -> list[Session]:
    """Every session under ``path``; a file no reader recognises is a warning, or the error when
    it is the only input."""
    top = Path(path)
    if top.is_file():  # a Claude Code session's subagents sit beside it, in <session>/subagents/
        related = _related(top.parent, top.name, {p.relative_to(top.parent).as_posix()
                                                  for p in (top.parent / top.stem / "subagents").glob("*.jsonl")})
        return read_file(Source(path, top.read_bytes(), related))
    if not top.is_dir():
        raise FileNotFoundError(2, "no such file or folder", path)
    files = sorted(p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file() and not p.is_symlink())
    if is_run_folder(files):
        return get_format("gh-aw").read(Source(path, files=local_run_files(top)))
    sessions: list[Session] = []
    runs: set[str] = set()
    listed = set(files)
    for rel in files:
        root = run_root_of(rel)
        if root is not None:
            if root not in runs:
                runs.add(root)
                sessions.extend(get_format("gh-aw").read(Source(f"{path.rstrip('/')}/{root}",
                                                             files=local_run_files(top / root))))
            continue
        if session_root_of(rel) is None:
            continue
        m = SUBAGENT_FILE.match(rel)
        if m and f"{m.group('session')}.jsonl" in listed:
            continue  # read with its session
        try:
            sessions.extend(read_file(Source(f"{path.rstrip('/')}/{rel}", (top / rel).read_bytes(),
                                             _related(top, rel, listed))))
        except FormatError as exc:
            warn(str(exc))
    if not sessions:
        raise FormatError(f"{path}: no agent session, trace or gh-aw run found in the folder")
    return sessions
