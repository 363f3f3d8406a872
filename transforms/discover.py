"""Discover run folders under ``--input`` (docs/architecture.md)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from graders.formats.ghaw.reader import is_run_folder
from graders.runs import runfiles
from graders.runs.layout import RUN_DIR, SESSION_SUFFIXES, artifact_top, run_root_of, session_root_of
from graders.runs.runfiles import NOT_UTF8, shown_name, utf8_name, walk_local
from transforms.beamfiles import join
from transforms.progress import DISCOVERED, FINISHED, RUN_FOLDERS, SESSION_FOLDERS, STRAY, Tally

# (run root relative to input, [(rel, size, mtime seconds)])
RunListing = tuple[str, list[tuple[str, int, float]]]


def _path_order(rel: str) -> list[str]:
    return rel.split("/")


def _name_order(rel: str) -> str:
    return rel


# The order in which a filesystem lists: by path component in the local walk (each folder's
# entries by name, depth first), by name on GCS. Listed in order, every folder's files come in
# one stretch, so a run's listing is complete once the walk has passed its folder.
_LISTING_ORDER: dict[str, Callable[[str], Any]] = {"": _path_order, "gs": _name_order}


def _scheme(base: str) -> str:
    head, sep, _ = base.partition("://")
    return head if sep else ""


def _entries(base: str) -> Iterator[tuple[str, int, float]]:
    """(path relative to ``base``, size, mtime seconds) of every file below ``base``, as listed."""
    if _scheme(base) == "":  # Beam's LocalFileSystem; a missing folder lists nothing
        yield from _local_entries(base)
        return
    prefix = base + "/"
    fs = FileSystems.get_filesystem(base)
    # What FileSystem.match does for a glob (every Beam filesystem implements ``_list``),
    # without collecting the result in a list.
    for meta in fs.match_files(fs._list(prefix), prefix + "**"):
        path: str = meta.path
        if path.startswith(prefix):
            mtime = float(getattr(meta, "last_updated_in_seconds", 0.0) or 0.0)
            yield path[len(prefix) :], int(meta.size_in_bytes), mtime


def _local_entries(top: str) -> Iterator[tuple[str, int, float]]:
    """The regular files below ``top`` with one ``stat`` each, in path order, and the entries
    that are not read (links, special files, unreadable folders, names that are not UTF-8) as
    negative-size entries (``graders.runs.runfiles.walk_local``): each becomes a warning of its run,
    or a dead letter where it is a folder outside any run.

    Without the two ``stat`` calls per file of Beam's ``LocalFileSystem`` and its glob match of
    every path (listing a run folder again for ``PrepareRun`` took ~0.5 ms, a tenth of grading
    a small run), and in a known order: each folder's entries by name, a subfolder's files where
    its name comes (``_path_order``).
    """
    return walk_local(top)


def _in_run(root_rel: str, rel: str) -> bool:
    """Whether a file of the folder at ``root_rel`` is the run's, not a nested run folder's."""
    if not root_rel:  # the input itself is the run
        return _belongs_to_base(rel) is not False
    return run_root_of(root_rel + "/" + rel) == root_rel


def _in_session_group(root_rel: str, rel: str) -> bool:
    """Whether a file of the folder at ``root_rel`` is one of its session files (graders/formats)."""
    full = f"{root_rel}/{rel}" if root_rel else rel
    return run_root_of(full) is None and session_root_of(full) == root_rel


def list_run(base: str, root_rel: str) -> list[tuple[str, int, float]]:
    """The sorted listing of one run folder, as ``ListRuns`` lists it within the fleet: a gh-aw
    run's files, or else, for a folder holding no gh-aw run, its session files."""
    def own(belongs: Callable[[str, str], bool]) -> list[tuple[str, int, float]]:
        return sorted(itertools.islice(
            # "." is the folder itself, which could not be read; a run folder's nested in it is not its
            ((rel, size, mtime) for rel, size, mtime in _entries(join(base, root_rel))
             if rel == "." or belongs(root_rel, rel)),
            # One entry past the run's budget is enough to refuse it (runfiles.bounded_listing).
            runfiles.MAX_RUN_FILES + 1,
        ))

    listing = own(_in_run)
    if not any(rel != "." and _gh_aw_file(root_rel, rel) for rel, _, _ in listing):
        # No gh-aw run here: the folder's session files, as discovery grouped them (if any).
        listing = own(_in_session_group) or listing
    if not listing and _scheme(base) == "" and _shown_not_utf8(join(base, root_rel)):
        listing = [(".", NOT_UTF8, 0.0)]  # a folder discovery did not enter for its name
    return listing


def _shown_not_utf8(path: str) -> bool:
    """Whether ``path`` is how a folder whose name is not UTF-8 is shown (``shown_name``)."""
    parent, _, leaf = path.rpartition("/")
    try:
        names = os.listdir(parent or ".")
    except OSError:
        return False
    return any(not utf8_name(name) and shown_name(name) == leaf for name in names)


def _gh_aw_file(root_rel: str, rel: str) -> bool:
    """Whether a file of the folder at ``root_rel`` makes it a gh-aw run (an artifact name at its top)."""
    if not root_rel:
        return _belongs_to_base(rel) is True
    return run_root_of(f"{root_rel}/{rel}") == root_rel


def _belongs_to_base(rel: str) -> bool | None:
    """Whether a file (relative to ``--input``) says the input is one run's folder: True for a
    gh-aw artifact name at its top, not within a nested run folder; False for a file of a run
    folder below; None for a file that says neither (a README)."""
    parts = rel.split("/")
    if artifact_top(parts) and not any(RUN_DIR.match(p) for p in parts[1:-1]):
        return True
    return False if run_root_of(rel) is not None else None


def hint_path(base: str, root_rel: str) -> str:
    """The path whose folders name a run's workflow and date (layout_hints): its root relative
    to the input, or, for an input that is one run folder, the input's own last folders."""
    if root_rel:
        return root_rel
    path = base.split("://", 1)[1].split("/", 1)[-1] if _scheme(base) else base  # no gs://bucket
    return "/".join([p for p in path.split("/") if p][-3:])


def holds_sessions(names: list[str]) -> bool:
    """A folder (its files' relative paths) of agent session / trace files of other formats, not a gh-aw run."""
    return not is_run_folder(names) and any(name.endswith(SESSION_SUFFIXES) for name in names)


class ListRuns(beam.DoFn):
    """The fleet root → one (run root, sorted listing) per run folder, as the listing streams by.

    Files are grouped where they are listed: a whole-fleet match (one object per file of the
    fleet) and a per-file shuffle to regroup it held a 10k-run fleet's ~150k files at once in
    the local runner (make bench memory). Where the listing comes in a known order, a run is
    emitted as soon as the walk has passed its folder, so only the runs being listed are held;
    the order is checked as the files come (a file out of order could split a run in two),
    which needs no memory of the runs already emitted.
    """

    def __init__(self) -> None:
        self.files = Metrics.counter("fleetgrade", "files_discovered")
        self.stray = Metrics.counter("fleetgrade", "stray_files_skipped")
        self.strays = 0  # of the last listing, for the progress line

    def process(self, base: str) -> Iterator[RunListing]:
        tally = Tally("discover")  # the job's progress line (transforms/progress.py)
        yield from self.discover(base, tally)
        tally.add(FINISHED)
        tally.flush()

    def discover(self, base: str, tally: Tally) -> Iterator[RunListing]:
        self.strays = 0  # files outside any run, counted by the listing
        for run in self._runs(base):
            tally.add(DISCOVERED)
            tally.add(SESSION_FOLDERS if holds_sessions([e[0] for e in run[1]]) else RUN_FOLDERS)
            yield run
        tally.add(STRAY, self.strays)

    def _runs(self, base: str) -> Iterator[RunListing]:
        """The runs of a fleet; or, when ``base`` is itself one run's folder (the first of its
        files that tells says so), that run (root ``""``), never its own subfolders
        (``mcp-logs/``, ``sandbox/``) as runs."""
        entries = _entries(base)
        # The files before the first that tells whether the input is one run's folder (READMEs).
        head: list[tuple[str, int, float]] = []
        own = None
        for entry in entries:
            head.append(entry)
            own = _belongs_to_base(entry[0])
            if own is not None:
                break
        if own:
            own_files = (e for e in itertools.chain(head, entries) if _in_run("", e[0]))
            # One entry past the run's budget is enough to refuse it (runfiles.bounded_listing).
            listing = sorted(itertools.islice(own_files, runfiles.MAX_RUN_FILES + 1))
            self.files.inc(len(listing))
            yield "", listing
            return
        yield from self._fleet_runs(base, itertools.chain(head, entries))

    def _fleet_runs(self, base: str, entries: Iterator[tuple[str, int, float]]) -> Iterator[RunListing]:
        order = _LISTING_ORDER.get(_scheme(base))
        open_runs: dict[str, list[tuple[str, int, float]]] = {}
        sessions: set[str] = set()  # open roots that are session groups, not gh-aw runs
        last: str | None = None
        last_key: Any = None
        files = stray = 0
        for rel, size, mtime in entries:
            files += 1
            if order is not None and size >= 0:  # an entry not read is shown, not sorted, by its name
                key = order(rel)
                if last_key is not None and key <= last_key:
                    raise RuntimeError(f"listing of {base} is not in order at {rel}: a run's files could be split")
                last_key = key
            root = run_root_of(rel)
            if root is None and size < 0 and rel.endswith("/."):
                # A folder outside any known run that cannot be entered may hold runs: it is
                # listed as a run of its own, which becomes a dead letter saying why.
                root, rel = rel[:-2], rel
            session = False
            if root is None:
                # A file outside every gh-aw run may be an agent session or trace of another
                # format: grouped by folder (layout.session_root_of), unless it sits in an open
                # gh-aw run's folder (a stray of that run, as before).
                root = session_root_of(rel)
                session = root is not None and not any(
                    rel.startswith(r + "/") for r in open_runs if r not in sessions)
                root = root if session else None
            if root is None:
                stray += 1
                continue
            if session:
                sessions.add(root)
            elif root in sessions:  # the folder is a gh-aw run after all: its session files were strays
                sessions.discard(root)
                kept = [e for e in open_runs.get(root, []) if run_root_of(f"{root}/{e[0]}") == root]
                stray += len(open_runs.get(root, [])) - len(kept)
                open_runs[root] = kept
            if root != last and order is not None:
                # The input's own folder ("") holds its session files until the end.
                for ended in [r for r in open_runs if r and not rel.startswith(r + "/")]:
                    sessions.discard(ended)
                    yield ended, sorted(open_runs.pop(ended))
            last = root
            run = open_runs.setdefault(root, [])
            # A run is held up to one entry past its budget, which refuses it (bounded_listing).
            if len(run) <= runfiles.MAX_RUN_FILES:
                run.append((rel[len(root) + 1 :] if root else rel, size, mtime))
        self.files.inc(files)
        self.stray.inc(stray)
        self.strays = stray
        for root in list(open_runs):
            yield root, sorted(open_runs.pop(root))


class DiscoverRuns(beam.PTransform):
    """``<input>/**`` → one (run root, sorted file listing) per run folder."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base.rstrip("/")

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return pbegin | "Root" >> beam.Create([self.base]) | "ListRuns" >> beam.ParDo(ListRuns())
