"""A run's own archived operational-value grader as a plan entry (docs/reference/graders.md §4 step 5).

gh-aw archives ``grader_manifest.json`` and ``operational_value_evaluator.sh`` with a run. When a
run carries them, the pipeline grades the run with that frozen evaluator; an archive that does
not verify becomes an entry that reports the reason as the grader's error.
"""

from __future__ import annotations

from graders.families.opvalue.errors import OperationalValueError
from graders.families.opvalue.executor import entry_from_archive
from graders.families.opvalue.freeze import EVALUATOR_FILENAME, find_archive_file, load_run_archive
from graders.grading.plan import PlanEntry
from graders.runs.runfiles import RunFiles

GRADER_ID = "operational-value"


def archived_entry(files: RunFiles) -> PlanEntry | None:
    """The run's archived evaluator entry, an erroring entry, or None when it carries none."""
    if find_archive_file(files, EVALUATOR_FILENAME) is None:
        return None
    try:
        return entry_from_archive(load_run_archive(files))
    except OperationalValueError as exc:
        return PlanEntry(id=GRADER_ID, name="Operational Value", source="operational-value",
                         direction="higher_is_better", error=str(exc))
