"""From a prepared run to the regrade core's input; shared by the pipeline and the one-run CLI.

``regrade()`` needs the run's files (the archive and the original results) and its recorded
subject; preparation already read the subject (``aw_info.json``) and the trace's ``artifacts``
(the request's ``outputs``), so nothing is read twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from graders.families.opvalue.freeze import EVALUATOR_FILENAME, find_archive_file
from graders.families.opvalue.regrade import RegradeRun
from graders.families.opvalue.request import RunSubject
from graders.prepare import PreparedRun
from graders.runs.runfiles import RunFiles


def has_archived_evaluator(files: RunFiles) -> bool:
    """Whether the run carries gh-aw's archived evaluator; runs without one are not regradable."""
    return find_archive_file(files, EVALUATOR_FILENAME) is not None


def regrade_input(prep: PreparedRun, files: RunFiles) -> RegradeRun:
    """The core's input; the subject is built as the grading step's (``graders.prepare.bind_executor``)."""
    m = prep.meta
    info = prep.aw_info or {}
    subject = RunSubject.from_aw_info(info, run_id=m.run_id, attempt=m.attempt,
                                      workflow=info.get("workflow_name") or m.workflow)
    outputs = prep.trace.get("artifacts") if isinstance(prep.trace, dict) else None
    return RegradeRun(files=files, subject=subject, workflow=m.workflow, date=m.date, outputs=outputs)


def _iso(value: datetime) -> str:
    text = value.isoformat(timespec="microseconds").replace("+00:00", "Z")
    return text.replace(".000000Z", "Z")


def observation_json(row: dict[str, Any]) -> dict[str, Any]:
    """An observations row as a JSON document: UTC ISO timestamps, JSON columns as objects."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, datetime):
            value = _iso(value)
        elif key in ("case", "provenance") and isinstance(value, str):
            value = orjson.loads(value)
        out[key] = value
    return out
