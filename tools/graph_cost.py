"""Fixed cost of the fleet graph (issue 33): seconds to build it and how many steps it has.

    python -m tools.graph_cost [--repeat N]

Builds ``pipeline.graph.build`` for the demo's graders and trace rules on a pipeline that is
never run, and prints the median build time, the leaf transforms (Beam steps before fusion)
and the composites the graph is made of.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions


def _counts(p: beam.Pipeline) -> tuple[int, int]:
    proto = p.to_runner_api()
    leaves = sum(1 for t in proto.components.transforms.values() if not t.subtransforms)
    composites = sum(1 for t in proto.components.transforms.values() if t.subtransforms)
    return leaves, composites


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from pipeline import graph
    from pipeline.plans import load_plans, load_trace_config

    plans = load_plans(None, "examples/graders")
    cfg = load_trace_config("examples/trace-grader.config.yaml")
    seconds = []
    leaves = composites = 0
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeat):
            p = beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"]))
            started = time.perf_counter()
            graph.build(p, "examples/fleet", out, plans, "cost", cfg)
            seconds.append(time.perf_counter() - started)
            leaves, composites = _counts(p)
    print(f"graph build: median {statistics.median(seconds) * 1000:.0f} ms over {args.repeat} "
          f"(min {min(seconds) * 1000:.0f} ms); {leaves} leaf transforms, {composites} composites")


if __name__ == "__main__":
    main()
