"""One fleet, one input per run identity (issue 31, "Fleet identity"; issue 40, across input kinds).

Two inputs with the same (workflow, run id, attempt), e.g. one run downloaded twice, or a run
folder and a session file whose records claim that run (gh-aw's own ``agent-session.jsonl`` of
the run, or an impostor), would both be graded into the same rows: the ``runs`` row would count
both inputs' graders, ``task_reliability`` a rerun that never happened, and the next job that
regraded only one of them would replace the other's grades. Before any run is prepared, each
run to grade is keyed by its identity: a run folder's (its ``aw_info.json``, else its path, as
``determine_run_meta`` reads them), and each session's of a folder of session files (its file
read through its reader, as preparing it will, without building the trace). An input alone
with its identity goes on unchanged. Inputs sharing one are compared byte for byte: identical
copies are graded once, from the first input by path, and every other copy becomes a
``duplicate`` dead letter naming the input graded; copies that differ (a run folder and a
session file always do) are all dead letters naming each other, since no one of them is the
run. A dead letter per extra copy keeps the job's count whole: runs discovered = graded +
dead-lettered (+ unchanged).

On an incremental job the inputs graded by earlier jobs and unchanged since take part too, by
their stored state: a new input holding the identity of such a run is a dead letter (its copy,
or a conflicting one), and the run's earlier grades stay; ``--full`` compares them all anew. A
dead letter of this stage is decided again by every job (its state says ``duplicate``), so once
its rival is gone, it is graded.

A session loses inside its folder's element, which is prepared whole: the claims its sessions
lost travel with the element, and :class:`PrepareOwned` turns those sessions into their dead
letters as they are prepared.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any, Final, cast

import apache_beam as beam
import msgspec
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from graders.jsrt.jsonio import MAX_FILE_SIZE
from graders.prepare import PreparedRun
from graders.prepare_sessions import SessionClaim, claim_sessions, session_digest
from graders.runs.layout import SESSION_SUFFIXES
from graders.runs.runfiles import memory_run_files
from graders.runs.runmeta import AW_INFO_PATHS, determine_run_meta
from graders.tables.rows import dead_letter_row
from graders.tables.state import listing_digest
from transforms.ahead import Ahead, windowed
from transforms.beamfiles import beam_run_files, join, pool, read_if_exists, store_for
from transforms.discover import hint_path, holds_sessions, list_run
from transforms.incremental import RunToGrade
from transforms.prepare import DEAD, DEAD_STATE, PrepareRun, RunToRead
from transforms.progress import DEAD_LETTERED, DONE, Tally

STAGE: Final = "duplicate"  # the dead_letter stage of an input not graded for its identity
Identity = tuple[str, str, int]  # (workflow, run id, attempt)


def _read_small(path: str) -> bytes | None:
    """A file's bytes, or None when it is absent, unreadable or over the size limit (then the
    run is prepared alone, and preparing it reports the problem)."""
    try:
        data = read_if_exists(path, MAX_FILE_SIZE + 1, of_a_run=True)  # one request on an object store
    except Exception:  # unreadable
        return None
    if data is None:  # absent (the common case for layout-only runs)
        return None
    return data if len(data) <= MAX_FILE_SIZE else None


def run_identity(base: str, root_rel: str) -> tuple[Identity, str] | None:
    """((workflow, run id, attempt), date) of a run folder as preparing it will determine them,
    or None when they cannot be (the run is then dead-lettered by preparation, with the reason)
    or the folder holds session files (:func:`session_claims`)."""
    return _identity(base, root_rel, _aw_info(join(base, root_rel)))


def _aw_info(root: str) -> tuple[str, bytes] | None:
    """A run folder's ``aw_info.json`` (its path and bytes), if it has one."""
    for rel in AW_INFO_PATHS:
        data = _read_small(join(root, rel))
        if data is not None:
            return rel, data
    return None


def _identity(base: str, root_rel: str, aw_info: tuple[str, bytes] | None) -> tuple[Identity, str] | None:
    """``run_identity``, its ``aw_info.json`` read (or found absent) already."""
    root = join(base, root_rel)
    if aw_info is not None:
        files = memory_run_files(dict([aw_info]), root)
    else:
        try:
            listed = [rel for rel, _, _ in list_run(base, root_rel)]
        except OSError:  # a folder that cannot be listed: preparing it says why (its dead letter)
            return None
        if holds_sessions(listed):
            return None  # a folder of session files: each session's identity is in its file
        files = memory_run_files({}, root)
    try:
        meta = determine_run_meta(files, hint_path(base, root_rel))
    except Exception:  # unidentifiable: graded (or dead-lettered) alone
        return None
    return (meta.workflow, meta.run_id, meta.attempt), meta.date


def session_claims(base: str, root_rel: str) -> list[SessionClaim] | None:
    """The identity each session of a folder of session files claims, read as preparing it
    will read it; None for any other folder. A file that cannot be read claims nothing
    (preparing it dead-letters it)."""
    try:
        listing = list_run(base, root_rel)
    except OSError:  # a folder that cannot be listed: preparing it says why (its dead letter)
        return None
    if not holds_sessions([rel for rel, _, _ in listing]):
        return None
    try:
        files = beam_run_files(join(base, root_rel), listing)
        return [c for c in claim_sessions(files, hint_path(base, root_rel)) if isinstance(c, SessionClaim)]
    except Exception:  # the folder itself cannot be read: preparing it says so
        return []


def identify(base: str, root_rel: str) -> tuple[list[SessionClaim] | None, tuple[Identity, str] | None]:
    """(the claims of a folder of session files, None) or (None, a run folder's identity or None)."""
    aw_info = _aw_info(join(base, root_rel))
    if aw_info is not None:  # a gh-aw run (is_run_folder), no folder of sessions: nothing to list
        return None, _identity(base, root_rel, aw_info)
    claims = session_claims(base, root_rel)
    return (claims, None) if claims is not None else (None, _identity(base, root_rel, None))


def content_digest(base: str, root_rel: str) -> str:
    """SHA-256 of a run folder's file names, sizes and bytes: equal for byte-identical copies
    wherever they are (modification times are not compared)."""
    root = join(base, root_rel)
    h = hashlib.sha256()
    for rel, size, _ in list_run(base, root_rel):
        file_hash = hashlib.sha256()
        with FileSystems.open(join(root, rel), compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            while block := fh.read(1 << 20):
                file_hash.update(block)
        h.update(f"{rel}\0{size}\0{file_hash.hexdigest()}\n".encode())
    return h.hexdigest()


def _kept_input(root: str) -> tuple[str, str] | None:
    """(kind, content digest) of an input graded by an earlier job, as it is now: a run folder
    ("run"), a session file ("session"), or None when it is gone (moved, deleted)."""
    if list_run(root, ""):
        return "run", content_digest(root, "")
    if root.endswith(SESSION_SUFFIXES) and FileSystems.exists(root):
        folder, _, name = root.rpartition("/")
        stem = name.removesuffix(".jsonl")
        listing = [e for e in list_run(folder, "") if e[0] == name or e[0].startswith(stem + "/subagents/")]
        try:
            return "session", session_digest(beam_run_files(folder, listing), name)
        except Exception:  # unreadable now: it cannot be compared, only conflict
            return "session", ""
    return None


# A member of an identity's group, as its shuffle carries it: (kind, date, the input to grade,
# the inputs graded earlier under that identity, its path, its content digest). Kind "run" is a
# run folder (its digest taken only when it meets another input), "session" one session of a
# folder of session files, "own" an input that meets no other (a session folder's element
# itself, an unidentifiable folder). Packed to bytes: the local runner holds a shuffle decoded,
# one element per run to grade, and bytes take ~120 bytes there where the tuple took ~450.
Member = tuple[str, str | None, RunToGrade, list[str], str, str]
_MEMBER_ENCODER: Final = msgspec.msgpack.Encoder()
_MEMBER_DECODER: Final = msgspec.msgpack.Decoder(Member)


# Runs whose identity is read ahead on an object store, while an earlier one is keyed.
IDENTITIES_AHEAD: Final = 16


class _KeyByIdentity(beam.DoFn):
    def __init__(self, base: str) -> None:
        self.base = base

    def setup(self) -> None:
        remote = store_for(self.base) is not None
        self._ahead: Ahead[RunToGrade] = Ahead(IDENTITIES_AHEAD if remote else 0, self._start)

    def _start(self, run: RunToGrade) -> Any:
        return pool().submit(identify, self.base, run[0]) if self._ahead.depth else None

    def process(self, run: RunToGrade, kept: Any, timestamp: Any = beam.DoFn.TimestampParam,
                window: Any = beam.DoFn.WindowParam) -> Iterator[tuple[Any, bytes]]:
        """``kept``: identity → roots, Beam's multimap side input (looked up one key at a time)."""
        self._kept = kept
        for ready, work in self._ahead.push(run, timestamp, window):
            yield from self._key(ready, work, kept)

    def finish_bundle(self) -> Any:
        return [windowed(out, ts, window) for run, work, ts, window in self._ahead.drain()
                for out in self._key(run, work, self._kept)] or None

    def _key(self, run: RunToGrade, work: Any, kept: Any) -> Iterator[tuple[Any, bytes]]:
        claims, found = work.result() if work is not None else identify(self.base, run[0])
        if claims is not None:  # the folder is prepared whole; each session claims its identity
            yield ("", run[0], 0), _MEMBER_ENCODER.encode(("own", None, run, [], "", ""))
            for c in claims:
                ident = (c.meta.workflow, c.meta.run_id, c.meta.attempt)
                yield ident, _MEMBER_ENCODER.encode(("session", c.meta.date, run, list(kept[ident]), c.path, c.digest))
            return
        if found is None:  # a key of its own: it meets no other input
            yield ("", run[0], 0), _MEMBER_ENCODER.encode(("own", None, run, [], "", ""))
        else:
            path = join(self.base, run[0])
            yield found[0], _MEMBER_ENCODER.encode(("run", found[1], run, list(kept[found[0]]), path, ""))


def _kept_identity(state: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    if state.get("outcome") == "graded":
        yield (state.get("workflow"), state.get("run_id"), state.get("attempt")), state.get("root")


class _Resolve(beam.DoFn):
    """An identity's inputs → the one to grade, and a dead letter for each other (a session's
    tagged ``CLAIMS``, for :class:`DropClaimed`)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.duplicates = Metrics.counter("fleetgrade", "runs_duplicate")
        self.dead = Metrics.counter("fleetgrade", "runs_dead_lettered")

    def setup(self) -> None:
        self._tally = Tally("duplicates")

    def finish_bundle(self) -> None:
        self._tally.flush()

    def process(self, kv: tuple[Any, Iterable[bytes]]) -> Iterator[Any]:
        key, encoded = kv
        members = sorted((_MEMBER_DECODER.decode(m) for m in encoded), key=lambda m: m[4])
        if members[0][0] == "own":
            yield _run_item(members[0][2])
            return
        paths = {m[4] for m in members}
        # Inputs graded earlier, other than these (a session folder regraded keeps its own path),
        # as they are now; one that is gone holds nothing any more.
        kept = [(root, now) for root in sorted({r for m in members for r in m[3]} - paths)
                if (now := _kept_input(root)) is not None]
        if len(members) == 1 and not kept:
            if members[0][0] == "run":
                yield _run_item(members[0][2])
            return
        workflow, run_id, attempt = key
        what = f"workflow {workflow!r}, run {run_id!r}, attempt {attempt}"
        digests = {f"{kind}:{digest}" for _, (kind, digest) in kept}
        digests |= {f"{m[0]}:{m[5] or content_digest(self.base, m[2][0])}" for m in members}
        roots = [root for root, _ in kept] + [m[4] for m in members]
        if len(digests) == 1 and "session:" not in digests and "run:" not in digests:
            # Byte-identical copies: graded once, from the first by path (one graded earlier first).
            first = roots[0]
            if not kept and members[0][0] == "run":
                yield _run_item(members[0][2])
            dead = members[1:] if not kept else members
            message = f"same run ({what}) as {first}, with byte-identical files: graded once, from {first}"
            error_class = "DuplicateRun"
        else:
            dead = members
            message = f"{len(roots)} inputs hold the run ({what}) with different files: {', '.join(roots)}; "
            message += (f"{', '.join(r for r, _ in kept)} keep their grades from an earlier job (--full compares "
                        "them anew)" if kept else "none is graded until one remains")
            error_class = "ConflictingRuns"
        for kind, date, (root_rel, _, previous, _), _, path, _ in dead:
            row = dead_letter_row(path, STAGE, f"{path}: {message}", run_id=run_id, workflow=workflow,
                                  date=date, error_class=error_class)
            if kind == "session":  # its folder is prepared; the session's run becomes this dead letter
                yield root_rel, (CLAIM, _ENCODER.encode([path, workflow, run_id, attempt, row]))
                continue
            self.dead.inc()
            self.duplicates.inc()
            self._tally.add(DONE)
            self._tally.add(DEAD_LETTERED)
            yield beam.pvalue.TaggedOutput(DEAD, row)
            yield beam.pvalue.TaggedOutput(DEAD_STATE, (row, listing_digest(list_run(self.base, root_rel)), previous))


class ResolveDuplicates(beam.PTransform):
    """(runs to grade, stored states kept unchanged) → (runs to grade, one input per identity;
    dead letters; their state items, as ``PrepareRun`` tags them; the claims sessions lost)."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base.rstrip("/")

    def expand(self, inputs: tuple[beam.PCollection, beam.PCollection]) -> Any:
        runs, kept = inputs
        # The kept inputs' identities reach each run to grade as a side input: complete once
        # discovery has listed the input, which is before any run to grade leaves its shuffle;
        # only the runs to grade are grouped (an unchanged rerun groups nothing).
        kept_roots = kept | "KeptIdentities" >> beam.FlatMap(_kept_identity)
        resolved = (
            runs
            | "KeyByIdentity" >> beam.ParDo(_KeyByIdentity(self.base), beam.pvalue.AsMultiMap(kept_roots))
            | "GroupByIdentity" >> beam.GroupByKey()
            | "Resolve" >> beam.ParDo(_Resolve(self.base)).with_outputs(DEAD, DEAD_STATE, main="runs")
        )
        # A folder of sessions meets the claims its sessions lost in a second (small) shuffle by
        # its root: it carries them to preparation (:class:`PrepareOwned`), in the same fused step.
        joined = resolved.runs | "JoinClaims" >> beam.GroupByKey() | "WithClaims" >> beam.FlatMap(_with_claims)
        return {"runs": joined, DEAD: resolved[DEAD], DEAD_STATE: resolved[DEAD_STATE]}


RUN, CLAIM = "r", "c"  # what Resolve keys by a run's root: the run, or a claim one of its sessions lost
_ENCODER: Final = msgspec.msgpack.Encoder()
_RUN_DECODER: Final = msgspec.msgpack.Decoder(RunToGrade)
_CLAIM_DECODER: Final = msgspec.msgpack.Decoder(list[Any])


def _run_item(run: RunToGrade) -> tuple[str, tuple[str, bytes]]:
    return run[0], (RUN, _ENCODER.encode(run))


def _with_claims(kv: tuple[str, Iterable[tuple[str, bytes]]]) -> Iterator[RunToGrade]:
    """A run to grade with the claims its sessions lost (none for a run folder)."""
    _, items = kv
    runs, claims = [], []
    for tag, blob in items:
        if tag == RUN:
            runs.append(_RUN_DECODER.decode(blob))
        else:
            claims.append(_CLAIM_DECODER.decode(blob))
    for root_rel, fingerprint, previous, _ in runs:
        yield root_rel, fingerprint, previous, sorted(claims, key=lambda c: c[:4])


class PrepareOwned(beam.DoFn):
    """``PrepareRun`` (composed), then each prepared session whose identity another input holds
    (a claim it lost, carried by its folder's element) → its dead letter and state instead."""

    def __init__(self, base: str) -> None:
        self.prepare = PrepareRun(base)
        self.prepared = Metrics.counter("fleetgrade", "runs_prepared")
        self.duplicates = Metrics.counter("fleetgrade", "runs_duplicate")
        self.dead = Metrics.counter("fleetgrade", "runs_dead_lettered")

    def setup(self) -> None:
        self.prepare.setup()
        # Claims lost by the bundle's folders, by (root, identity): on an object store
        # ``PrepareRun`` gives a run's outputs while later runs are fetched (transforms/ahead.py),
        # so an output is matched to its own folder's claims, not the element being processed.
        self._claims: dict[tuple[Any, ...], Any] = {}

    def finish_bundle(self) -> Any:
        out = []
        for held in self.prepare.finish_bundle() or []:  # windowed values of the runs held ahead
            if isinstance(held, beam.pvalue.TaggedOutput):
                out.append(held)
                continue
            out += [windowed(o, held.timestamp, held.windows[0]) for o in self._owned(held.value)]
        self._claims.clear()
        return out or None

    def process(self, element: Any, timestamp: Any = beam.DoFn.TimestampParam,
                window: Any = beam.DoFn.WindowParam) -> Iterator[Any]:
        if len(element) > 3:
            self._claims.update({tuple(c[:4]): c[4] for c in element[3]})
        for out in self.prepare.process(cast(RunToRead, element), timestamp, window):
            yield from self._owned(out)

    def _owned(self, out: Any) -> Iterator[Any]:
        """An output of ``PrepareRun``; a prepared session whose identity another input holds → its
        dead letter and state instead."""
        row = None
        if self._claims and isinstance(out, PreparedRun):
            m = out.meta
            row = self._claims.get((m.root, m.workflow, m.run_id, m.attempt))
        if row is None:
            yield out
            return
        self.prepared.inc(-1)  # counted as prepared: it is a dead letter instead
        self.dead.inc()
        self.prepare._tally.add(DEAD_LETTERED)  # the progress line's count too
        self.duplicates.inc()
        yield beam.pvalue.TaggedOutput(DEAD, row)
        yield beam.pvalue.TaggedOutput(DEAD_STATE, (row, out.listing_digest, out.previous))
