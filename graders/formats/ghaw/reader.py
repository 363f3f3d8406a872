"""gh-aw artifact folders (and every `gh aw logs` layout, graders/runs/download_layout.py) as the
``gh-aw`` format: a folder format, read by ``graders.formats.ghaw.preprocess``
exactly as the reference-compatible graders need it. ``fleetgrade run`` keeps preparing these folders through ``graders.prepare``;
this entry lets ``fleetgrade trace --input <run folder>`` read one through the same seam.
"""

from __future__ import annotations

from graders.formats.ghaw.preprocess import PreprocessReport, preprocess
from graders.formats.ghaw.trace import delivered
from graders.formats.session import FormatError, Session, Source, text
from graders.grading.registry import input_format
from graders.runs.layout import ARTIFACT_NAMES, artifact_top
from graders.runs.runmeta import determine_run_meta, read_aw_info

KIND = "gh-aw"


def is_run_folder(listed: list[str]) -> bool:
    """Whether a folder's files (POSIX paths relative to it) are a gh-aw run's."""
    return any(artifact_top([p for p in rel.split("/") if p]) for rel in listed)


@input_format(KIND)
class GhAw:
    kind = KIND
    folder = True  # sniffed on a folder's listing, read from its files

    def sniff(self, name: str, head: bytes) -> bool:
        return name.split("/", 1)[0] in ARTIFACT_NAMES

    def read(self, source: Source) -> list[Session]:
        files = source.files
        if files is None:
            raise FormatError(f"{source.name}: a gh-aw run is a folder, not a file")
        report = PreprocessReport(warnings=list(files.warnings))
        trace = preprocess(files, report)
        _, info = read_aw_info(files)
        session = Session(KIND, source.name, warnings=report.warnings, trace_dict=trace,
                          delivered=delivered(trace))
        try:
            meta = determine_run_meta(files, source.name)
            session.run_id, session.workflow, session.attempt = meta.run_id, meta.workflow, meta.attempt
            session.created_at, session.repository = meta.created_at, meta.repository
        except ValueError:  # identity is optional for trace rules: aw_info.json, else the folder, names the run
            info = info or {}
            session.workflow = text(info.get("workflow_name"))
            session.run_id = text(info.get("run_id")) or source.name.rstrip("/").rsplit("/", 1)[-1]
        return [session]
