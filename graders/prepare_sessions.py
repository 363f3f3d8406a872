"""A folder's session files → prepared runs (``fleetgrade run``), one per session, or a failure
per file that no reader can read (it becomes a dead letter naming the file).

A session's identity: workflow, run id and date from the file where it records them, else the
workflow is the name of the folder holding the file and the run id the file's name; the date is
the session's first timestamp, else a ``YYYY-MM-DD`` folder above it. Attempt 1 unless recorded.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from graders.formats import SNIFF_BYTES, Session, Source, read_file, sniff
from graders.formats.claude_code import SUBAGENT_FILE
from graders.formats.evidence import SESSION_FILES, session_evidence
from graders.formats.ghaw.preprocess import PreprocessReport
from graders.formats.session import ON_RECORD, FileStream
from graders.prepare import PreparedRun
from graders.runs.layout import DATE_DIR, SNIFFED_SUFFIXES, layout_hints, not_a_date_folder
from graders.runs.runfiles import RunFiles
from graders.runs.runmeta import (
    MAX_REPOSITORY_CHARS,
    MAX_RUN_ID_CHARS,
    MAX_WORKFLOW_CHARS,
    RUN_DATES,
    MetadataError,
    check_name,
    parse_attempt,
    utc_date_of,
)
from schemas.documents import RunMeta

UNIFIED = SESSION_FILES[0]  # where a run keeps its unified session


@dataclass
class NotASession:
    """A ``.json`` document or ``.log`` no reader recognises (a manifest, a `gh aw logs --json`
    summary, a build log): a stray, as every other file outside a run; a ``.jsonl``/``.ndjson``
    one is a failure instead."""

    path: str


@dataclass
class SessionClaim:
    """The identity one session claims (``prepare_sessions(claims_only=True)``): its file, its
    run identity, and the digest of its file's bytes (its subagents' included)."""

    path: str
    meta: RunMeta
    digest: str


@dataclass
class SessionFailure:
    """A session file that is not graded: where it is, why, and what its path says."""

    path: str
    error: Exception
    workflow: str | None
    date: str | None


def _folder_workflow(hint: str) -> str | None:
    """The nearest folder above a session file that is no date folder (``YYYY-MM-DD``, ``date=…``)."""
    return next((p for p in reversed(hint.split("/")) if p and not DATE_DIR.match(p)), None)


def session_date(session: Session, hint: str, display: str, mtime: float | None) -> str:
    """The session's date: its first timestamp; else the date part of a timestamp that does not
    parse (a warning says so); else a ``YYYY-MM-DD`` folder above the file; else the file's
    modification time (a warning says so); else none can be given (``MetadataError``). Each within
    the run dates fleetgrade grades."""
    if session.created_at is not None:
        return utc_date_of(session.created_at, display, "the session's first timestamp")
    if session.date_part is not None:
        day = utc_date_of(session.date_part, display, f"the date part of the timestamp {session.bad_time!r}")
        session.warnings.append(f"{display}: timestamp {session.bad_time!r} is not ISO 8601; the session's "
                                f"date is its date part, {day}")
        return day
    found = layout_hints(f"{hint}/x" if hint else "x")[2]
    if found is not None:
        return found
    bad = f" (timestamp {session.bad_time!r} is not ISO 8601)" if session.bad_time else " (no timestamp in the file)"
    bad_folder = not_a_date_folder(f"{hint}/x")
    if bad_folder is not None:
        raise MetadataError(f"{display}: no date in the file{bad}, and the folder {bad_folder!r} above it is "
                            f"not a real date (YYYY-MM-DD) within the run dates fleetgrade grades ({RUN_DATES})")
    if mtime is not None:
        try:
            stamp = datetime.fromtimestamp(mtime, UTC).isoformat()
        except (ValueError, OverflowError, OSError):
            stamp = None
        if stamp is not None:
            day = utc_date_of(stamp, display, "the file's modification time")
            session.warnings.append(f"{display}: no usable date in the file{bad} and no YYYY-MM-DD folder "
                                    f"above it; the session's date is the file's modification time, {day}")
            return day
    raise MetadataError(f"{display}: cannot determine the session's date{bad}, no YYYY-MM-DD folder above "
                        "it and no modification time")


def session_meta(session: Session, file_rel: str, hint: str, display: str, mtime: float | None = None) -> RunMeta:
    """The run identity of one session of the file ``file_rel`` (relative to its group folder,
    whose path relative to the input is ``hint``)."""
    stem = file_rel.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    from_file = session.run_id is not None and session.workflow is not None
    workflow = session.workflow or _folder_workflow(hint) or session.kind
    run_id = session.run_id or stem
    date = session_date(session, hint, display, mtime)
    check_name(workflow, "workflow", MAX_WORKFLOW_CHARS, display)
    check_name(run_id, "run id", MAX_RUN_ID_CHARS, display)
    if session.repository is not None:
        check_name(session.repository, "repository", MAX_REPOSITORY_CHARS, display)
    return RunMeta(workflow=workflow, run_id=run_id, attempt=parse_attempt(session.attempt, display), date=date,
                   created_at=session.created_at, repository=session.repository,
                   metadata_source="file" if from_file else "layout", root=display)


def _digest(parts: list[tuple[str, int, str]]) -> str:
    """The session's input digest from each file's (path, bytes, SHA-256)."""
    h = hashlib.sha256()
    for rel, size, sha in parts:
        h.update(f"{rel}\0{size}\0{sha}\n".encode())
    return h.hexdigest()


def session_digest(files: RunFiles, rel: str) -> str:
    """The input digest of the session file ``rel`` of a folder's ``files`` (with its subagent
    files), as :func:`prepare_sessions` takes it: equal for byte-identical copies."""
    stem = rel.removesuffix(".jsonl")
    own = [rel, *sorted(r for r in files.sizes if SUBAGENT_FILE.match(r) and r.startswith(stem + "/"))]
    return _digest([(r, *FileStream(files, r).digest()) for r in own])


def _open_as(files: RunFiles, rel: str, _as: str) -> AbstractContextManager[IO[bytes]]:
    """``files``' file ``rel``, opened under another name (a session file read as a run's file)."""
    return files.open(rel)


def prepare_sessions(files: RunFiles, hint: str) -> Iterator[PreparedRun | SessionFailure | NotASession]:
    """Every session of every file in ``files`` (one folder's session files), one file at a time
    (:func:`_read_sessions`)."""
    for item in _read_sessions(files, hint, claims_only=False):
        assert not isinstance(item, SessionClaim)
        yield item


def claim_sessions(files: RunFiles, hint: str) -> Iterator[SessionClaim | SessionFailure | NotASession]:
    """The identity each session of ``files`` claims, read as :func:`prepare_sessions` reads it
    (the same readers, budgets and failures) but with no trace built (transforms/duplicates.py)."""
    for item in _read_sessions(files, hint, claims_only=True):
        assert not isinstance(item, PreparedRun)
        yield item


def _read_sessions(files: RunFiles, hint: str, claims_only: bool,
                   ) -> Iterator[PreparedRun | SessionClaim | SessionFailure | NotASession]:
    """Every session of every file in ``files`` (one folder's session files), one file at a time.

    Whatever reading one file raises (a reader's bug included) is that file's failure: the
    generator itself does not raise, so its sessions can be graded as they come, each file read
    as a stream and freed before the next (docs/hostile-input.md, "Memory"). ``claims_only``:
    each session's :class:`SessionClaim` instead, read alike but with no trace built."""
    root = files.root.rstrip("/")
    names = sorted(files.sizes)
    subagent = {rel for rel in names if SUBAGENT_FILE.match(rel) and f"{rel.split('/', 1)[0]}.jsonl" in names}
    for rel in names:
        if rel in subagent:
            continue  # read with its session (claude_code.read_session)
        display = f"{root}/{rel}"
        folder_hint = "/".join(p for p in (hint, rel.rpartition("/")[0]) if p)
        wf_hint, _, date_hint = layout_hints(f"{folder_hint}/x") if folder_hint else (None, None, None)
        stem = rel.removesuffix(".jsonl")
        own = [rel, *(r for r in sorted(subagent) if r.startswith(stem + "/"))]
        # Each session file is an input of its own: its own read budget (bytes, time), not the folder's.
        one = RunFiles(files.root, {r: files.sizes[r] for r in own}, files.open)
        streams = {r: FileStream(one, r) for r in own}
        prepared: list[PreparedRun | SessionClaim] = []
        try:
            if rel.endswith(SNIFFED_SUFFIXES) and sniff(rel, streams[rel].head(SNIFF_BYTES)) is None:
                yield NotASession(display)
                continue
            counted = ON_RECORD.set(functools.partial(one.keep, 1, rel))
            try:
                sessions: Any = read_file(Source(display, streams[rel], {r: streams[r] for r in own[1:]}))
            finally:
                ON_RECORD.reset(counted)
            parts = [(r, *streams[r].digest()) for r in own]
            digest = _digest(parts)
            for s in sessions:
                meta = session_meta(s, rel, folder_hint, display, files.mtimes.get(rel))
                if claims_only:  # who the session says it is (transforms/duplicates.py), nothing more
                    prepared.append(SessionClaim(display, meta, digest))
                    continue
                report = PreprocessReport(sources={"session": rel}, warnings=list(s.warnings),
                                          bytes_read=sum(size for _, size, _ in parts))
                run = s.run(task=meta.workflow, run_id=meta.run_id)
                # A unified session is read again, streamed, by the observed layer's own reader.
                unified = RunFiles(one.root, {UNIFIED: one.sizes[rel]}, functools.partial(_open_as, one, rel)) \
                    if s.kind == "aw-session" else None
                prepared.append(PreparedRun(meta, s.trace(), report, digest, evidence=session_evidence(s, unified),
                                            source_kind=s.kind, steps_run=run))
            sessions = None  # the readers' sessions are not kept while their runs are graded
            one.check_time(rel)
        except Exception as exc:  # this file's failure, never the folder's: the others are graded
            yield SessionFailure(display, exc, _folder_workflow(folder_hint) or wf_hint, date_hint)
            continue
        finally:
            files.bytes_read += one.bytes_read
        yield from prepared
