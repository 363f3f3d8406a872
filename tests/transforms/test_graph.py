"""The pipeline stages on a small fleet, checked with TestPipeline + assert_that."""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to, is_not_empty

from graders.families.observed import observed_plan
from graders.families.trace_rules.config import default_config
from graders.grading.plan import PlanSet, default_plan
from tests.helpers.beam import local_test_pipeline
from transforms.discover import DiscoverRuns
from transforms.grade import Grade
from transforms.prepare import DEAD, PrepareRun


def make_fleet(root: Path) -> None:
    ok = root / "wf-a" / "run-11"
    (ok / "mcp-logs").mkdir(parents=True)
    (ok / "aw_info.json").write_text('{"workflow_name": "wf-a", "run_id": 11, "created_at": "2026-05-01T23:30:00-02:00"}')
    (ok / "mcp-logs" / "gateway.jsonl").write_text('{"type":"tool_call","tool_name":"a"}\n{"type":"tool_call","tool_name":"a"}\n')
    dated = root / "wf-b" / "2026-05-03" / "77"
    (dated / "agent_output.json").parent.mkdir(parents=True)
    (dated / "agent_output.json").write_text('{"items": [{"type": "x"}]}')
    broken = root / "wf-b" / "run-12"
    broken.mkdir(parents=True)
    (broken / "aw_info.json").write_text("[1, 2]")
    (root / "README.md").write_text("stray")


def test_discover_groups_files_by_run(tmp_path):
    make_fleet(tmp_path)
    with local_test_pipeline() as p:
        runs = p | DiscoverRuns(str(tmp_path))
        roots = runs | beam.Map(lambda kv: (kv[0], [item[0] for item in kv[1]]))
        assert_that(roots, equal_to([
            ("wf-a/run-11", ["aw_info.json", "mcp-logs/gateway.jsonl"]),
            ("wf-b/2026-05-03/77", ["agent_output.json"]),
            ("wf-b/run-12", ["aw_info.json"]),
        ]))


def test_prepare_and_grade(tmp_path):
    make_fleet(tmp_path)
    plans = PlanSet(default_plan())
    N = len(default_plan().enabled) + len(observed_plan().enabled)  # the observed graders count too
    with local_test_pipeline() as p:
        prepared = (
            p | DiscoverRuns(str(tmp_path))
            | beam.ParDo(PrepareRun(str(tmp_path))).with_outputs(DEAD, main="runs")
        )
        graded = prepared.runs | Grade(plans, default_config())
        results = graded["grader_results"]
        # Each run's runs row leaves grading whole.
        runs = graded["runs"] | "RunIds" >> beam.Map(lambda r: (r["workflow"], r["date"], r["run_id"], r["graders"]))
        assert_that(runs, equal_to([("wf-a", "2026-05-02", "11", N), ("wf-b", "2026-05-03", "77", N)]), label="runs")
        verdicts = graded["trace_verdicts"] | "VerdictIds" >> beam.Map(lambda r: r["run_id"])
        assert_that(verdicts, equal_to(["11", "77"]), label="verdicts")
        loops = (
            results
            | beam.Filter(lambda r: r["grader_id"] in ("loops", "artifact-production"))
            | beam.Map(lambda r: (r["run_id"], r["grader_id"], r["value"], r["status"]))
        )
        assert_that(loops, equal_to([
            ("11", "loops", 1.0, "pass"), ("11", "artifact-production", 0.0, "pass"),
            ("77", "loops", 0.0, "pass"), ("77", "artifact-production", 1.0, "pass"),
        ]), label="values")
        dead = prepared[DEAD] | beam.Map(lambda r: (r["input"].rsplit("/", 2)[-2:], r["error_class"], r["message"].endswith("aw_info.json: expected a JSON object")))
        assert_that(dead, equal_to([(["wf-b", "run-12"], "MetadataError", True)]), label="dead")
        failures = (graded["dead_letter"], graded["crashed"]) | "Failures" >> beam.Flatten()
        assert_that(failures, equal_to([]), label="no grade failures")
        assert_that(results, is_not_empty(), label="results")


def _reference_listings(base: Path) -> dict[str, list[str]]:
    from graders.runs.layout import run_root_of

    out: dict[str, list[str]] = {}
    for p in sorted(base.rglob("*")):
        if p.is_file():
            rel = p.relative_to(base).as_posix()
            root = run_root_of(rel)
            if root is not None:
                out.setdefault(root, []).append(rel[len(root) + 1:])
    return {k: sorted(v) for k, v in out.items()}


def test_streamed_discovery_emits_each_run_once_and_whole_nested_roots_included(tmp_path):
    from transforms.discover import ListRuns

    _nested_fleet(tmp_path)
    got = list(ListRuns().process(str(tmp_path)))
    assert len({root for root, _ in got}) == len(got)
    assert {root: [f[0] for f in files] for root, files in got} == _reference_listings(tmp_path)


def _nested_fleet(root: Path) -> None:
    make_fleet(root)
    nested = root / "wf-c" / "x"
    (nested / "run-5" / "mcp-logs").mkdir(parents=True)
    (nested / "aw_info.json").write_text("{}")  # root wf-c/x (artifact name) ...
    (nested / "run-5" / "mcp-logs" / "gateway.jsonl").write_text("")  # ... holding root wf-c/x/run-5
    (nested / "zz").mkdir()
    (nested / "zz" / "agent_output.json").write_text("{}")  # wf-c/x again, after the nested run


def test_one_run_is_listed_again_exactly_as_discovery_listed_it(tmp_path):
    from transforms.discover import ListRuns, list_run

    _nested_fleet(tmp_path)
    got = list(ListRuns().process(str(tmp_path)))
    assert {root for root, _ in got} >= {"wf-c/x", "wf-c/x/run-5", "wf-a/run-11"}
    for root, listing in got:
        assert list_run(str(tmp_path), root) == listing, root  # sizes and mtimes too
    assert list_run(str(tmp_path), "wf-none/run-1") == []


def test_the_local_walk_lists_regular_files_as_beam_does_and_links_as_entries_not_read(tmp_path):
    import os

    from apache_beam.io.filesystems import FileSystems

    from graders.runs.runfiles import SYMLINK
    from transforms.discover import _entries

    _nested_fleet(tmp_path)
    (tmp_path / "wf-a" / "run-11" / ".hidden").write_text("h")
    (tmp_path / "wf-a" / "run-11" / "deep" / "er").mkdir(parents=True)
    (tmp_path / "wf-a" / "run-11" / "deep" / "er" / "x.jsonl").write_text("{}\n")
    os.symlink(tmp_path / "wf-a" / "run-11" / "aw_info.json", tmp_path / "wf-b" / "run-12" / "linked.json")
    os.symlink(tmp_path / "wf-a", tmp_path / "wf-b" / "run-12" / "linked-folder")
    os.symlink(tmp_path / "nowhere", tmp_path / "wf-b" / "run-12" / "broken")
    base = str(tmp_path)
    fs = FileSystems.get_filesystem(base)
    beam_listed = sorted((m.path[len(base) + 1:], m.size_in_bytes, m.last_updated_in_seconds)
                         for m in fs.match_files(fs._list(base + "/"), base + "/**"))
    listed = sorted(_entries(base))
    # Regular files as Beam's LocalFileSystem lists them; no link is followed, each is named.
    assert [e for e in listed if e[1] >= 0] == [e for e in beam_listed if not os.path.islink(f"{base}/{e[0]}")]
    assert ("wf-b/run-12/linked.json", os.path.getsize(tmp_path / "wf-a" / "run-11" / "aw_info.json"),
            os.path.getmtime(tmp_path / "wf-b" / "run-12" / "linked.json")) in beam_listed
    assert [e for e in listed if e[1] < 0] == [(f"wf-b/run-12/{name}", SYMLINK, 0.0)
                                               for name in ("broken", "linked-folder", "linked.json")]
    assert list(_entries(str(tmp_path / "missing"))) == []


def test_prepare_reads_a_run_as_it_is_now_and_records_that_listing(tmp_path):
    from apache_beam.metrics.metric import MetricsFilter

    from graders.tables.state import listing_digest, listing_fingerprint
    from transforms.discover import list_run
    from transforms.prepare import DEAD_STATE

    make_fleet(tmp_path)
    base = str(tmp_path)
    stale = listing_digest(list_run(base, "wf-a/run-11"))
    with open(tmp_path / "wf-a" / "run-11" / "mcp-logs" / "gateway.jsonl", "a") as fh:
        fh.write('{"type":"tool_call","tool_name":"b"}\n')  # written after discovery listed it
    now = {root: listing_digest(list_run(base, root)) for root in ("wf-a/run-11", "wf-b/2026-05-03/77")}
    assert now["wf-a/run-11"] != stale
    fp = listing_fingerprint
    todo = [("wf-a/run-11", fp(stale), None), ("wf-b/2026-05-03/77", fp(now["wf-b/2026-05-03/77"]), None),
            ("wf-b/run-99", fp(listing_digest([("aw_info.json", 2, 0.0)])), None)]  # gone since discovery
    p = local_test_pipeline()
    prepared = p | beam.Create(todo) | beam.ParDo(PrepareRun(base)).with_outputs(DEAD, DEAD_STATE, main="runs")
    assert_that(prepared.runs | beam.Map(lambda r: (r.meta.root, r.listing_digest, r.meta.run_id)), equal_to([
        (f"{base}/wf-a/run-11", now["wf-a/run-11"], "11"),
        (f"{base}/wf-b/2026-05-03/77", now["wf-b/2026-05-03/77"], "77"),
    ]), label="graded as they are now")
    assert_that(prepared[DEAD] | beam.Map(lambda r: (r["input"], r["message"])), equal_to([
        (f"{base}/wf-b/run-99", f"{base}/wf-b/run-99: the run folder has no files any more (it had when discovered)"),
    ]), label="gone")
    assert_that(prepared[DEAD_STATE] | beam.Map(lambda item: item[1]), equal_to([listing_digest([])]), label="state")
    result = p.run()
    result.wait_until_finish()
    changed = result.metrics().query(MetricsFilter().with_name("runs_changed_since_discovery"))["counters"]
    assert [c.committed for c in changed] == [2]  # the rewritten run and the emptied one


def test_a_listing_that_returns_to_a_left_folder_is_an_error(tmp_path):
    from unittest.mock import patch

    import pytest

    from transforms.discover import ListRuns

    order = ["wf/run-1/aw_info.json", "wf/run-2/aw_info.json", "wf/run-1/evals.jsonl"]
    with patch("transforms.discover._entries", return_value=iter((rel, 1, 0.0) for rel in order)), \
            pytest.raises(RuntimeError, match=r"not in order at wf/run-1/evals\.jsonl"):
        list(ListRuns().process(str(tmp_path)))


def test_the_local_walk_lists_in_path_order(tmp_path):
    """Each folder's entries by name, depth first: the order ListRuns checks as it streams."""
    from transforms.discover import _entries

    _nested_fleet(tmp_path)
    for rel in ("wf-a/run-1/aw_info.json", "wf-a/run-1-attempt-2/aw_info.json", "wf-a/run-1.x/aw_info.json",
                "wf-a/run-1/sub/evals.jsonl", "wf-a/run-1/a.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    rels = [rel for rel, _, _ in _entries(str(tmp_path))]
    assert rels == sorted(rels, key=lambda r: r.split("/")) and len(rels) == len(set(rels))
    assert rels != sorted(rels)  # not the name order of an object store: "run-1-attempt-2/" < "run-1/"


def test_an_object_store_listing_in_name_order_streams_whole_runs():
    """On GCS names sort as strings, so a run's files can follow a sibling whose name extends its
    own ("run-1-attempt-2/" before "run-1/"): still one stretch per folder, and no error."""
    from unittest.mock import patch

    from graders.runs import layout
    from transforms.discover import ListRuns

    order = sorted(["wf/run-1/aw_info.json", "wf/run-1/mcp-logs/gateway.jsonl", "wf/run-1-attempt-2/aw_info.json",
                    "wf/run-10/aw_info.json", "wf/x/aw_info.json", "wf/x/run-5/aw_info.json", "wf/x/zz/agent_output.json"])
    with patch("transforms.discover._entries", return_value=iter((rel, 1, 0.0) for rel in order)):
        got = dict(ListRuns().process("gs://bucket/fleet"))
    expected: dict[str, list[str]] = {}
    for rel in order:
        root = layout.run_root_of(rel)
        assert root is not None
        expected.setdefault(root, []).append(rel[len(root) + 1:])
    assert {root: [f[0] for f in files] for root, files in got.items()} == expected
    assert expected["wf/run-1"] == ["aw_info.json", "mcp-logs/gateway.jsonl"] and "wf/x/run-5" in expected
