"""One run's folder given on its own (``fleetgrade grade``/``preprocess``): identity optional.

A fleet needs every run's workflow, id and date to partition its tables, so discovery refuses a
run without them (graders/runs/runmeta.py). One run graded on its own needs none of them: gh-aw's
grading step itself runs with an empty run id when ``GITHUB_RUN_ID`` is unset. Whatever
``aw_info.json`` or the folder's whole path says is used; the rest stays empty.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

from graders.runs.layout import ARTIFACT_NAMES, DATE_DIR, RUN_DIR, run_root_of
from graders.runs.runfiles import RunFiles
from graders.runs.runmeta import MetadataError, parse_attempt, read_aw_info, text_value, utc_date_of
from schemas.documents import RunMeta


def path_hints(path: str) -> tuple[str | None, str | None, str | None]:
    """(workflow, run id, date) read from a run folder's whole path, each None if absent.

    Only a folder that names a run (``run-<id>``, or a numeric GitHub run id) gives a run id,
    and only then is the folder above it (past a ``YYYY-MM-DD`` folder) its workflow: any other
    folder name (``raw``, ``artifacts``, ``tmp``) says nothing about the run.
    """
    parts = [p for p in PurePosixPath(path.replace(os.sep, "/")).parts if p not in ("/", "")]
    if not parts:
        return None, None, None
    leaf, parents = parts[-1], parts[:-1]
    m = RUN_DIR.match(leaf)
    run_id = m.group(1) if m else (leaf if leaf.isdigit() else None)
    date = workflow = None
    for part in reversed(parents):
        d = DATE_DIR.match(part)
        if d:
            date = date or d.group(1)
            continue
        if run_id is not None:
            workflow = part
        break
    return workflow, run_id, date


def single_run_meta(files: RunFiles, path: str) -> RunMeta:
    """The identity of the run at ``path`` (its full path): ``aw_info.json`` first, then the path.

    What neither says is empty. The result is not validated as a fleet identity (whose fields
    may not be empty): it is only printed into gh-aw's files, never partitioned by.
    """
    rel, info = read_aw_info(files)
    wf_hint, id_hint, date_hint = path_hints(path)
    where = files.display(rel) if rel else files.root
    info = info or {}
    created_raw = info.get("created_at")
    created_at = created_raw.strip() if isinstance(created_raw, str) and created_raw.strip() else None
    repository = info.get("repository")
    date = date_hint or ""
    if created_at is not None:
        try:
            date = utc_date_of(created_at, where)
        except MetadataError:  # nothing is partitioned by it here: the path's date, if any
            pass
    return RunMeta.model_construct(
        workflow=text_value(info.get("workflow_name")) or wf_hint or "",
        run_id=text_value(info.get("run_id")) or id_hint or "",
        attempt=parse_attempt(info.get("run_attempt"), where),
        date=date,
        created_at=created_at,
        repository=repository if isinstance(repository, str) else None,
        metadata_source="aw_info" if rel else "layout",
        root=files.root,
    )


def runs_inside(files: RunFiles) -> list[str]:
    """The run folders below a folder that is not itself a run's artifact root (none if it is)."""
    if any(rel.split("/", 1)[0] in ARTIFACT_NAMES for rel in files.sizes):
        return []
    return sorted({root for rel in files.sizes if (root := run_root_of(rel)) is not None})
