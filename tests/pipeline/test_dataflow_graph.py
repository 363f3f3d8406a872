"""The job graph a DataflowRunner submission would get, built and inspected without submitting."""

from __future__ import annotations

import json

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from graders.grading.plan import PlanSet, default_plan
from pipeline import graph
from tests.conftest import REPO


def dataflow_pipeline() -> beam.Pipeline:
    options = PipelineOptions([
        "--runner=DataflowRunner", "--project=fleet-project", "--region=us-central1",
        "--temp_location=gs://fleet-bucket/tmp", "--setup_file=./setup.py",
        "--sdk_container_image=us-docker.pkg.dev/fleet-project/fleetgrade/worker:0.1.0",
        "--dry_run=True",  # Beam skips the GCS checks that need network; nothing is submitted
    ])
    return beam.Pipeline(options=options)


def _hinted_steps(plans: PlanSet) -> tuple[set[str], set[str]]:
    p = dataflow_pipeline()
    graph.build(p, "gs://fleet-bucket/fleet", "gs://fleet-bucket/graded", plans, "token", resource_hints=True)
    proto = p.to_runner_api()
    names = {t.unique_name for t in proto.components.transforms.values()}
    hinted = {t.unique_name for t in proto.components.transforms.values()
              if t.environment_id and proto.components.environments[t.environment_id].resource_hints}
    return names, hinted


def test_graph_is_its_named_stages_and_a_sandboxed_family_asks_for_memory():
    names, hinted = _hinted_steps(PlanSet(default_plan()))  # archived operational-value evaluators: sandboxed
    for step in ("ReadRuns/Discover/Decide", "ReadRuns/Discover/Spread", "ReadRuns/Identity", "Prepare/Read",
                 "Grade/GradeRun", "TrackState", "TraceVerdicts/Reliability", "Stats", "WriteTables/Commit"):
        assert any(n == step or n.startswith(step + "/") for n in names), step
    # Every family of a run is graded in its one step, which runs where there is more memory.
    assert any(n.startswith("Grade/GradeRun") for n in hinted)
    assert not any(n.startswith(("Prepare/", "WriteTables/")) for n in hinted)


def test_without_a_sandboxed_family_no_step_asks_for_memory():
    _, hinted = _hinted_steps(PlanSet(default_plan(), archived_evaluators=False))
    assert not hinted


def test_flex_template_metadata_names_the_run_flags():
    meta = json.loads((REPO / "dataflow" / "flex-template-metadata.json").read_text())
    names = {p["name"] for p in meta["parameters"]}
    assert {"input", "output", "graders", "graders_dir", "trace_config", "full", "since", "until"} <= names
