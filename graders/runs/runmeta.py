"""Run identity: ``aw_info.json`` first, else the folder layout (README.md, "A fleet folder").

A run whose workflow or date cannot be determined is not graded into a default bucket: it
raises :class:`MetadataError`, which the pipeline turns into a ``dead_letter`` row.
"""

from __future__ import annotations

import math
import unicodedata
from datetime import UTC, datetime
from typing import Any, Final

from graders.jsrt.jscompat import js_number_to_string
from graders.jsrt.jsonio import MAX_FILE_SIZE, JsonError, parse_json
from graders.runs.layout import FIRST_DATE, LAST_DATE, layout_hints, not_a_date_folder
from graders.runs.runfiles import RunFiles
from schemas.documents import RunMeta

AW_INFO_PATHS: Final = ("aw_info.json", "aw-info/aw_info.json")


class MetadataError(ValueError):
    """The run's identity cannot be determined; the message names the file and the problem."""


def read_aw_info(files: RunFiles) -> tuple[str | None, dict[str, Any] | None]:
    """(path, document) of the run's ``aw_info.json``, (None, None) without one; the document is
    read and parsed once per run (the identity and ``prepare_run`` both ask), shared, not copied."""
    known = files.parsed.get("aw_info")
    if known is not None:
        rel, value, size = known
        # runs.bytes_read has counted the file once per asker: kept, so the rows do not change.
        files.charge(size, rel)
        return rel, value
    for rel in AW_INFO_PATHS:
        size = files.size(rel)
        if size is None:
            continue
        if size > MAX_FILE_SIZE:
            raise MetadataError(f"{files.display(rel)}: file is {size} bytes, over the 50 MiB limit")
        data = files.read(rel)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MetadataError(f"{files.display(rel)}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
        try:
            value = parse_json(text)
        except JsonError as exc:
            raise MetadataError(f"{files.display(rel)}: not valid JSON ({exc})") from exc
        if not isinstance(value, dict):
            raise MetadataError(f"{files.display(rel)}: expected a JSON object")
        files.parsed["aw_info"] = (rel, value, len(data))
        return rel, value
    return None, None


def text_value(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


# The identity becomes partition paths and columns: it is checked against both before use.
MAX_ATTEMPT: Final = 2**31 - 1  # the ``attempt`` columns are int32
MAX_WORKFLOW_CHARS: Final = 256
MAX_RUN_ID_CHARS: Final = 128
MAX_REPOSITORY_CHARS: Final = 512
MAX_EXACT: Final = 2**53  # JSON.parse reads a whole number beyond this as the nearest double
# Run dates every stage can compute with: statistics windows and baselines reach 20 years back
# from a date (--regression-window/-baseline, 3,660 days each), a partition's date is a DATE in
# BigQuery and DuckDB and a timestamp in pandas (1677–2262). No agent run predates the Unix epoch.
MIN_RUN_DATE: Final = FIRST_DATE
MAX_RUN_DATE: Final = LAST_DATE
RUN_DATES: Final = f"{MIN_RUN_DATE} to {MAX_RUN_DATE}"


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _json_value(value: Any) -> str:
    """A parsed JSON value as its JSON text would read, for a message (numbers as JavaScript prints them)."""
    if isinstance(value, float):
        if math.isinf(value):
            return "a number beyond the range of a double (JSON.parse reads it as Infinity)"
        if math.isnan(value):
            return "NaN"
        return js_number_to_string(value)
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**30 else f"a whole number of {len(str(abs(value)))} digits"
    return _short(str(value))


def id_value(value: Any, field: str, where: str) -> str | None:
    """An identity field (``run_id``, ``workflow_name``) as text; None when absent or blank; a
    :class:`MetadataError` naming the file and the field when it is there but cannot be an id: a
    number JSON.parse cannot read exactly (not whole, beyond 2**53), true/false, an array or object."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value) and float(value).is_integer() and abs(value) <= MAX_EXACT:
            return str(int(value))
        raise MetadataError(f"{where}: {field} must be text or a whole number up to 2^53, got {_json_value(value)}"
                            " (write a larger id as text)")
    raise MetadataError(f"{where}: {field} must be text or a whole number, got {_json_value(value)}")


def parse_attempt(value: Any, where: str) -> int:
    if value is None:
        return 1
    text = text_value(value)
    # isdigit() alone accepts "²" and other digits int() refuses: ASCII digits only, and never
    # int() of more digits than an attempt can have (thousands of them raise).
    digits = text.lstrip("0") if text is not None and text.isascii() and text.isdigit() else ""
    if not digits:
        raise MetadataError(f"{where}: run_attempt must be a whole number from 1 to {MAX_ATTEMPT}, got "
                            f"{_json_value(value)}")
    if len(digits) > 10 or int(digits) > MAX_ATTEMPT:
        raise MetadataError(f"{where}: run_attempt {_json_value(value)} is out of range (at most {MAX_ATTEMPT})")
    return int(digits)


def check_name(value: str, field: str, limit: int, where: str) -> str:
    """``value`` if it can name a partition or fill a column: at most ``limit`` characters, no
    control characters (a newline or NUL in a path or a log line is never meant)."""
    if len(value) > limit:
        raise MetadataError(f"{where}: {field} is {len(value)} characters long, over the limit of "
                            f"{limit}: {_short(value)}")
    if value.isascii() and value.isprintable():  # the common case: no control character, in C
        return value
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        raise MetadataError(f"{where}: {field} holds the control character {bad!r}: {_short(value)}")
    return value


def utc_date_of(created_at: str, where: str, field: str = "created_at") -> str:
    """The UTC date of an ISO 8601 timestamp, within ``RUN_DATES``; else a :class:`MetadataError`
    naming the file, the field and the value."""
    try:
        ts = datetime.fromisoformat(created_at)
        if ts.tzinfo is not None:
            ts = ts.astimezone(UTC)
    except (ValueError, OverflowError) as exc:  # e.g. 9999-12-31T23:00-05:00 is past year 9999 in UTC
        raise MetadataError(f"{where}: {field} is not an ISO 8601 timestamp within years 1 to 9999: "
                            f"{_short(created_at)}") from exc
    date = ts.date().isoformat()
    if not MIN_RUN_DATE <= date <= MAX_RUN_DATE:
        raise MetadataError(f"{where}: {field} {_short(created_at)} is dated {date}, outside the run dates "
                            f"fleetgrade grades ({RUN_DATES})")
    return date


def determine_run_meta(files: RunFiles, run_root: str) -> RunMeta:
    """Workflow, run id, attempt and date of the run at ``run_root`` (relative to the fleet root)."""
    rel, info = read_aw_info(files)
    wf_hint, id_hint, date_hint = layout_hints(run_root)
    where = files.display(rel) if rel else files.root
    info = info or {}
    named = id_value(info.get("workflow_name"), "workflow_name", where)
    workflow = named or wf_hint
    run_id = id_value(info.get("run_id"), "run_id", where) or id_hint
    created_raw = info.get("created_at")
    if created_raw is not None and not isinstance(created_raw, str):
        raise MetadataError(f"{where}: created_at must be an ISO 8601 timestamp (text), got {_json_value(created_raw)}")
    created_at = created_raw.strip() if isinstance(created_raw, str) and created_raw.strip() else None
    if workflow is None:
        raise MetadataError(
            f"{where}: cannot determine the workflow (no aw_info.json workflow_name and the path "
            f"has no <workflow>/ folder above the run)"
        )
    if run_id is None:
        raise MetadataError(f"{where}: cannot determine the run id")
    bad_folder = not_a_date_folder(run_root)
    if created_at is not None:
        date = utc_date_of(created_at, where)
    elif bad_folder is not None:
        raise MetadataError(f"{files.root}: the folder {bad_folder!r} in its path is not a real date "
                            f"(YYYY-MM-DD) within the run dates fleetgrade grades ({RUN_DATES}), and "
                            "aw_info.json has no created_at")
    elif date_hint is not None:
        date = date_hint  # layout_hints gives calendar dates only
    else:
        raise MetadataError(
            f"{where}: cannot determine the run date (no aw_info.json created_at and no "
            f"YYYY-MM-DD folder in the path)"
        )
    check_name(workflow, "workflow_name" if named else "the workflow folder", MAX_WORKFLOW_CHARS, where)
    check_name(run_id, "run_id", MAX_RUN_ID_CHARS, where)
    repository = info.get("repository") if isinstance(info.get("repository"), str) else None
    if repository is None and info.get("repository") is not None:
        raise MetadataError(f"{where}: repository must be text (owner/name), got {_json_value(info.get('repository'))}")
    if repository is not None:
        check_name(repository, "repository", MAX_REPOSITORY_CHARS, where)
    return RunMeta(
        workflow=workflow,
        run_id=run_id,
        attempt=parse_attempt(info.get("run_attempt"), where),
        date=date,
        created_at=created_at,
        repository=repository,
        metadata_source="aw_info" if rel else "layout",
        root=files.root,
    )
