"""docs/architecture.md, "Adding a table": its worked example, run end to end.

The example's spec is registered and seen by every consumer that derives from the specs: the
sink writes and merges it, ``fleetgrade sql``'s views and the report read it, the BigQuery DDL
declares it, and a regraded run's rows are dropped from it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from graders.prepare import prepare_run
from graders.runs.runfiles import local_run_files
from graders.tables.state import drops_for, graded_state
from pipeline.bigquery import all_ddl
from pipeline.report.scope import Selection, open_scope
from pipeline.tables import connect
from schemas import tables
from tests.conftest import REPO
from tests.helpers.beam import local_test_pipeline
from transforms.discover import DiscoverRuns
from transforms.prepare import DEAD, PrepareRun
from transforms.sink import TableWrites, WriteTables

ARCHITECTURE = REPO / "docs" / "architecture.md"
RUNS = ("ci-doctor/run-7100487", "ci-doctor/run-7100525", "issue-triage/run-7100042")


def example() -> dict[str, Any]:
    """The section's one Python block, executed: its spec and row builder."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("\n## Adding a table\n"):]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, "the section has one Python block"
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], f"{ARCHITECTURE}:Adding a table", "exec"), namespace)
    return namespace


@pytest.fixture
def tool_usage(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    ns = example()
    monkeypatch.setitem(tables.SPECS, "tool_usage", ns["TOOL_USAGE"])
    return ns


def _fleet(tmp_path: Path) -> Path:
    fleet = tmp_path / "fleet"
    for rel in RUNS:
        shutil.copytree(REPO / "examples" / "fleet" / rel, fleet / rel)
    return fleet


def _write(writes: Any, out: Path, token: str) -> Any:
    return writes | WriteTables(str(out), token)


def test_the_worked_example_writes_a_table_every_reader_sees(tool_usage: dict[str, Any], tmp_path: Path) -> None:
    fleet, out = _fleet(tmp_path), tmp_path / "out"
    builder = tool_usage["tool_usage_rows"]
    preps = [prepare_run(local_run_files(fleet / rel), rel) for rel in RUNS]
    expected = sorted((r["workflow"], r["date"], r["run_id"], r["attempt"], r["tool"], r["calls"])
                      for prep in preps for r in builder(prep))
    assert len({row[2] for row in expected}) == len(RUNS), "every run has tool calls"

    with local_test_pipeline() as p:
        prepared = (p | DiscoverRuns(str(fleet))
                    | beam.ParDo(PrepareRun(str(fleet))).with_outputs(DEAD, main="runs"))
        rows = prepared.runs | "ToolUsage" >> beam.FlatMap(builder)
        committed = _write(TableWrites({"tool_usage": rows}), out, "job-1")
        assert_that(committed | beam.Map(lambda rel: rel.split("/", 1)[0]) | beam.Distinct(),
                    equal_to(["tool_usage"]))

    # Read back as `fleetgrade sql` and the report read tables.
    got = connect(str(out)).execute(
        "SELECT workflow, CAST(date AS VARCHAR), run_id, attempt, tool, calls FROM tool_usage ORDER BY ALL").fetchall()
    assert got == expected
    _, present = open_scope(str(out), Selection())
    assert "tool_usage" in present
    ddl = all_ddl("gs://bucket/out", "ds")
    assert "CREATE EXTERNAL TABLE `ds.tool_usage` (run_id STRING, attempt INT64, tool STRING, calls INT64, " \
           "fleetgrade_version STRING)" in ddl

    # A regraded run: its earlier rows are dropped (it is a RUN table), the other runs' rows stay.
    m = preps[0].meta
    state = graded_state(m.root, "listing", "grading", m.workflow, m.date, m.run_id, m.attempt)
    drops = drops_for(state)
    assert ("tool_usage", m.workflow, m.date, (m.run_id, m.attempt)) in drops
    with local_test_pipeline() as p:
        _write(TableWrites({"tool_usage": ()}, drops=p | beam.Create(drops)), out, "job-2")
    left = connect(str(out)).execute("SELECT DISTINCT run_id FROM tool_usage ORDER BY 1").fetchall()
    assert [r[0] for r in left] == sorted({row[2] for row in expected} - {m.run_id})


def test_a_table_without_a_spec_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no TableSpec for tables \\['tool_usage'\\]"), local_test_pipeline() as p:
        _write(TableWrites({"tool_usage": p | beam.Create([{"run_id": "1"}])}), tmp_path / "out", "job")
