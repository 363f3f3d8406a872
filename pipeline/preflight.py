"""Checks a pipeline command makes before it reads any run: each mistake is one UsageError.

A nightly job must not grade a whole fleet and then fail on its output, nor succeed on an input
that holds nothing; these checks run in seconds, before the pipeline starts.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from graders.families.inline_js.sandbox import JsGraderError, JsSandbox
from graders.formats import SNIFF_BYTES, sniff
from graders.runs.layout import SNIFFED_SUFFIXES, run_root_of, session_root_of
from graders.runs.runfiles import DIR, sorted_entries, split_entry
from pipeline.errors import UsageError, literal_path
from pipeline.plans import graders_dir_files
from schemas.state_table import STATE_TABLE
from schemas.tables import SPECS
from transforms.gcs import NoCredentials, credentials, use_emulator_if_configured

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions

    from graders.grading.plan import PlanSet


def is_gcs(path: str) -> bool:
    return path.startswith("gs://")


def check_window(since: str | None, until: str | None) -> None:
    if since is not None and until is not None and since > until:
        raise UsageError(f"--since {since} is after --until {until}: the window holds no date")


def check_placement(input_base: str, output: str, runner: str) -> None:
    """Where input and output are, relative to each other and to the runner's workers; both
    literal paths (no glob character)."""
    literal_path(input_base, "--input")
    literal_path(output, "--output")
    if runner == "dataflow":
        for flag, path in (("--input", input_base), ("--output", output)):
            if not is_gcs(path):
                raise UsageError(f"the dataflow runner's workers read and write gs:// only; {flag} is local", path)
    if _inside(output, input_base):
        raise UsageError("--output is inside --input; its files would be read as input", output)


def _inside(path: str, base: str) -> bool:
    """``path`` is ``base`` or below it."""
    if is_gcs(path) != is_gcs(base):
        return False
    if is_gcs(path):
        p, b = PurePosixPath(path[5:].rstrip("/")), PurePosixPath(base[5:].rstrip("/"))
        return p == b or b in p.parents
    lp, lb = Path(path).resolve(), Path(base).resolve()
    return lp == lb or lb in lp.parents


# -- outputs inside outputs -------------------------------------------------------------------

# A folder is a fleetgrade output when it holds one of these: every `run` writes `_state`, and an
# output only `regrade` wrote has observations or dead letters.
_OUTPUT_MARKERS = ((STATE_TABLE, ""), ("observations", "workflow="), ("dead_letter", "workflow="))


def _folders_up(path: str, include_self: bool) -> list[str]:
    """``path`` (when ``include_self``) and the folders above it, nearest first."""
    if is_gcs(path):
        bucket, _, rest = path[5:].rstrip("/").partition("/")
        parts = [p for p in rest.split("/") if p]
        found = [f"gs://{bucket}/{'/'.join(parts[:n])}".rstrip("/") for n in range(len(parts), -1, -1)]
    else:
        resolved = Path(path).resolve()
        found = [str(p) for p in (resolved, *resolved.parents)]
    return found if include_self else found[1:]


def _is_output(folder: str, options: PipelineOptions | None) -> bool:
    for table, prefix in _OUTPUT_MARKERS:
        if is_gcs(folder):
            listed = _gcs_io(options).list_files(f"{folder}/{table}/{prefix}")
            if next(iter(listed), None) is not None:
                return True
            continue
        where = Path(folder, table)
        try:
            if where.is_dir() and any(entry.name.startswith(prefix) for entry in os.scandir(where)):
                return True
        except OSError:  # unreadable: not known to be an output
            continue
    return False


def enclosing_output(path: str, options: PipelineOptions | None = None, include_self: bool = True) -> str | None:
    """The fleetgrade output ``path`` is (with ``include_self``) or lies inside, if any."""
    return next((f for f in _folders_up(path, include_self) if _is_output(f, options)), None)


def _where_in(path: str, output: str) -> str:
    """`` (its <table> table)`` when ``path`` is inside a table folder of ``output``."""
    rel = path.rstrip("/")[len(output.rstrip("/")) + 1:] if is_gcs(path) else str(
        Path(path).resolve().relative_to(Path(output)))
    table = rel.split("/", 1)[0]
    return f" (its {table} table)" if table in SPECS else ""


def check_not_nested(input_base: str, output: str, options: PipelineOptions | None = None) -> None:
    """An output inside another output (or one of its table folders) would be read as that
    output's rows; an input that is an output holds tables, not runs."""
    outer = enclosing_output(output, options, include_self=False)
    if outer is not None:
        raise UsageError(f"--output is inside the fleetgrade output {outer}{_where_in(output, outer)}; its readers "
                         f"would take these files for rows of that output: give {outer} itself, or a folder "
                         "outside it", output)
    holder = enclosing_output(input_base, options)
    if holder is not None:
        what = ("a fleetgrade output" if holder == _folders_up(input_base, True)[0]
                else f"inside the fleetgrade output {holder}{_where_in(input_base, holder)}")
        raise UsageError(f"--input is {what}: it holds tables, not runs; give the fleet folder the runs were "
                         "read from", input_base)


# -- output ------------------------------------------------------------------------------------

def check_output(output: str, options: PipelineOptions | None = None) -> str:
    """The output can be written (a test object is written and deleted); what was checked."""
    if is_gcs(output):
        return _check_gcs_output(output, options)
    path = Path(output)
    if path.exists() and not path.is_dir():
        raise UsageError("--output is a file, not a folder", output)
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"--output cannot be created: {probe} is a file", output)
    try:
        fd, name = tempfile.mkstemp(prefix=".fleetgrade-write-test-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise UsageError(f"--output is not writable: {exc.strerror or exc}", str(probe)) from exc
    return f"output {output} writable"


def check_credentials(place: str) -> str:
    """Google credentials for gs://, looked up once, up front, with no retries: a missing or
    unusable one is one line saying how to provide it and naming ``place``, the gs:// path that
    needs it (Beam's own lookup retries for minutes, with tracebacks)."""
    try:
        credentials()
    except NoCredentials as exc:
        raise UsageError(str(exc), place) from exc
    return "gs:// credentials"


def _gcs_io(options: PipelineOptions | None) -> Any:
    from apache_beam.io.gcp.gcsio import GcsIO

    use_emulator_if_configured()
    return GcsIO(pipeline_options=options)


def _bucket(path: str) -> str:
    return path[5:].split("/", 1)[0]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_bucket(gcs: Any, path: str, flag: str) -> None:
    bucket = _bucket(path)
    if not bucket:
        raise UsageError(f"{flag} names no bucket", path)
    try:
        found = gcs.get_bucket(bucket)
    except Exception as exc:  # credentials, network, permissions: all stop the job here
        raise UsageError(f"cannot look up the bucket of {flag}: {_first_line(exc)}", path) from exc
    if found is None:
        raise UsageError(f"the bucket of {flag} does not exist", f"gs://{bucket}")


def _check_gcs_output(output: str, options: PipelineOptions | None) -> str:
    gcs = _gcs_io(options)
    _check_bucket(gcs, output, "--output")
    probe = f"{output.rstrip('/')}/.fleetgrade-write-test-{uuid.uuid4().hex}"
    try:
        with gcs.open(probe, "wb") as fh:
            fh.write(b"fleetgrade checks it can write here before grading\n")
        gcs.delete(probe)
    except Exception as exc:
        raise UsageError(f"--output is not writable: {_first_line(exc)}", output) from exc
    return f"output {output} writable"


# -- input -------------------------------------------------------------------------------------

def check_input(input_base: str, allow_empty: bool, options: PipelineOptions | None = None) -> str:
    """The input exists and holds a run folder (unless ``allow_empty``); what was checked."""
    if is_gcs(input_base):
        _check_bucket(_gcs_io(options), input_base, "--input")
    else:
        path = Path(input_base)
        if not path.exists():
            raise UsageError("--input does not exist", input_base)
        if not path.is_dir():
            raise UsageError("--input is a file, not a fleet folder", input_base)
    try:
        found = _first_run(input_base.rstrip("/"))
    except Exception as exc:  # a listing that fails is the input's problem, not a bug
        raise UsageError(f"cannot list --input: {_first_line(exc)}", input_base) from exc
    if found is None:
        if allow_empty:
            return f"input {input_base} (empty, allowed)"
        raise UsageError("--input holds no run folder (<workflow>/run-<id>/…) nor session file; "
                         "pass --allow-empty if an empty fleet is expected", input_base)
    return f"input {input_base} holds runs"


def check_places(input_base: str, output: str, allow_empty: bool,
                 options: PipelineOptions | None = None) -> list[str]:
    """The output and input checks of one side: the local places without ``options`` (no Beam is
    needed, so those mistakes are reported at once), the ``gs://`` ones with Beam's options."""
    remote = options is not None
    nesting = (is_gcs(output) or is_gcs(input_base)) == remote  # checked once, when every place is reachable
    if nesting and not remote:  # before the input's own check: "it holds tables" says more than "no run"
        check_not_nested(input_base, output)
    checked = []
    if remote and (is_gcs(output) or is_gcs(input_base)):  # after Beam's options, before its first request
        checked.append(check_credentials(input_base if is_gcs(input_base) else output))
    if is_gcs(output) == remote:
        checked.append(check_output(output, options))
    if is_gcs(input_base) == remote:
        checked.append(check_input(input_base, allow_empty, options))
    if nesting and remote:  # after the buckets are known to exist
        check_not_nested(input_base, output, options)
    return checked


def _first_run(base: str) -> str | None:
    """The first run folder discovery would find under ``base``, listing no further."""
    for rel in _local_files(base, "") if not is_gcs(base) else _listed(base):
        root = run_root_of(rel)
        if root is None and _session_file(base, rel):  # a session / trace file of another format
            root = session_root_of(rel)
        if root is not None:
            return root
    return None


def _session_file(base: str, rel: str) -> bool:
    """Whether ``rel`` is graded as a session file (graders/prepare_sessions.py): a ``.jsonl`` or
    ``.ndjson`` always; a local ``.json`` or ``.log`` only if a reader recognises it (other JSON
    documents and logs beside runs, manifests and summaries, are strays)."""
    if session_root_of(rel) is None:
        return False
    if not rel.endswith(SNIFFED_SUFFIXES) or is_gcs(base):
        return True
    try:
        with open(os.path.join(base, rel), "rb") as fh:
            return sniff(rel, fh.read(SNIFF_BYTES)) is not None
    except OSError:
        return True  # unreadable: preparing it says so


def _local_files(folder: str, rel: str) -> Iterator[str]:
    """Files below ``folder`` as discovery walks them (symlinked folders are not entered),
    without importing Beam, so a local input is checked before Beam starts."""
    for item in sorted_entries(folder):
        name, kind = split_entry(item)
        if kind == DIR:
            yield from _local_files(os.path.join(folder, name), rel + name + "/")
        else:
            yield rel + name


def _listed(base: str) -> Iterator[str]:
    from transforms.discover import _entries

    for rel, _, _ in _entries(base):
        yield rel


# -- graders -----------------------------------------------------------------------------------

_LINE_SUFFIX = re.compile(r"^(.*?)(?: \((line \d+|at the end)\))?$", re.S)


def compile_inline_graders(plans: PlanSet, graders: str | None, graders_dir: str | None) -> int:
    """Compile every inline JavaScript grader once, with no run data, in the graders' sandbox.

    A script that does not compile fails every run it grades; gh-aw's compiler refuses such a
    workflow, so the command does too, naming the file and the grader. Returns the count compiled.
    """
    scripts = [(where, entry.id, entry.script)
               for where, plan in _plans_by_file(plans, graders, graders_dir)
               for entry in plan.enabled if entry.source == "inline" and entry.script]
    if not scripts:
        return 0
    sandbox = JsSandbox()
    try:
        for where, grader_id, script in scripts:
            try:
                error = sandbox.syntax_error(script)
            except JsGraderError:
                return 0  # no V8 here: every inline grader fails closed per run, as documented
            if error is not None:
                message, at = _LINE_SUFFIX.match(error).groups()  # type: ignore[union-attr]
                place = f"{where}: graders.{grader_id}.script" + (f", {at}" if at else "")
                raise UsageError(f"inline grader {grader_id!r} does not compile: {message}", place)
    finally:
        sandbox.close()
    return len(scripts)


def _plans_by_file(plans: PlanSet, graders: str | None, graders_dir: str | None) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    if graders:
        found.append((graders, plans.default))
    if graders_dir:
        files = graders_dir_files(graders_dir)
        for workflow, plan in plans.by_workflow:
            where = files.get(workflow)
            found.append((str(where) if where is not None else f"{graders_dir}/{workflow}", plan))
    return found
