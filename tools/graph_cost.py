"""Fixed cost of the fleet graph (issue 33): seconds to build it and how many steps it has.

    python -m tools.graph_cost [--repeat N]

Builds ``pipeline.graph.build`` for the demo's graders and trace rules on a pipeline that is
never run, and prints the median build time, the leaf transforms (Beam steps before fusion), the
composites the graph is made of, and the stages the local runner fuses them into.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions


def _counts(p: beam.Pipeline) -> tuple[int, int, int]:
    """(leaf transforms, composites, stages after the local runner's fusion)."""
    from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner

    proto = p.to_runner_api()
    leaves = sum(1 for t in proto.components.transforms.values() if not t.subtransforms)
    composites = sum(1 for t in proto.components.transforms.values() if t.subtransforms)
    _, stages = FnApiRunner().create_stages(proto)
    return leaves, composites, len(stages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from pipeline import graph
    from pipeline.plans import load_plans, load_trace_config

    plans = load_plans(None, "examples/graders")
    cfg = load_trace_config("examples/trace-grader.config.yaml")
    seconds = []
    leaves = composites = fused = 0
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeat):
            p = beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"]))
            started = time.perf_counter()
            graph.build(p, "examples/fleet", out, plans, "cost", cfg)
            seconds.append(time.perf_counter() - started)
            leaves, composites, fused = _counts(p)
    print(f"graph build: median {statistics.median(seconds) * 1000:.0f} ms over {args.repeat} "
          f"(min {min(seconds) * 1000:.0f} ms); {leaves} leaf transforms, {composites} composites, "
          f"{fused} stages after fusion")


if __name__ == "__main__":
    main()
