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


def test_graph_has_one_step_per_grader_family_and_resource_hints():
    p = dataflow_pipeline()
    graph.build(p, "gs://fleet-bucket/fleet", "gs://fleet-bucket/graded", PlanSet(default_plan()), "token",
                resource_hints=True)
    proto = p.to_runner_api()
    names = {t.unique_name for t in proto.components.transforms.values()}
    for step in ("Discover/Decide", "Discover/Spread", "Prepare", "Grade/Grade[builtin]", "Grade/Grade[trajectory]",
                 "Grade/Grade[operational-value]", "TraceRules", "Reliability", "Write/Commit"):
        assert any(n == step or n.startswith(step + "/") for n in names), step
    # The sandboxed family runs in an environment that asks for more memory.
    hinted = {t.unique_name for t in proto.components.transforms.values()
              if t.environment_id and proto.components.environments[t.environment_id].resource_hints}
    assert any(n.startswith("Grade/Grade[operational-value]") for n in hinted)
    assert not any(n.startswith("Grade/Grade[builtin]") for n in hinted)


def test_flex_template_metadata_names_the_run_flags():
    meta = json.loads((REPO / "dataflow" / "flex-template-metadata.json").read_text())
    names = {p["name"] for p in meta["parameters"]}
    assert {"input", "output", "graders", "graders_dir", "trace_config", "full", "since", "until"} <= names
