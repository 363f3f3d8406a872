"""`fleetgrade report`: every number in the HTML equals an independent DuckDB query over the same data.

The HTML carries ``data-metric`` attributes on its key elements; the tests parse them back.
Browser tests (headless Chromium) are in ``test_report_browser.py``.
"""

from __future__ import annotations

import datetime as dt
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.report.queries import collect
from pipeline.report.render import render
from pipeline.report.scope import Selection
from pipeline.stats_read import recompute_regressions, worst_first
from pipeline.tables import connect
from tests.helpers.demo import CHANGE_DATE, demo_root
from tests.pipeline.report_fixtures import (
    FIRST,
    HOSTILE_MESSAGE,
    HOSTILE_REPO,
    HOSTILE_RUN,
    build_rows,
    write_output,
)

__all__ = ["demo_root"]  # the fixture
GATED = "(passed IS NOT NULL OR (status = 'error' AND threshold IS NOT NULL))"


class Collect(HTMLParser):
    """Every element's tag and attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


def parse(html: str) -> list[tuple[str, dict[str, str | None]]]:
    p = Collect()
    p.feed(html)
    return p.elements


def metrics(html: str, name: str) -> list[dict[str, str | None]]:
    return [a for _, a in parse(html) if a.get("data-metric") == name]


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "out"
    write_output(out, build_rows())
    # The trace tables are not registered in this checkout: the report finds them on disk.
    return out


def report(out: Path, *extra: str, html: Path | None = None) -> str:
    target = html or out / "report.html"
    assert main(["report", str(out), "--html", str(target), *extra]) == 0
    return target.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def synth_html(synth) -> str:
    return report(synth)


def q(out: Path, sql: str, params: list | None = None) -> list[tuple]:
    return connect(str(out)).execute(sql, params or []).fetchall()


def test_pass_rate_points_match_duckdb(synth, synth_html):
    want = {(w, d.isoformat()): (p, g) for w, d, p, g in q(synth, f"""
        SELECT workflow, date, count_if(passed), count_if({GATED}) FROM grader_results GROUP BY ALL""")}
    got = {(a["data-workflow"], a["data-date"]): (int(a["data-passed"]), int(a["data-gated"]), float(a["data-value"]))
           for a in metrics(synth_html, "pass-rate")}
    assert len(got) == len(want) == 3 * 20
    for key, (p, g) in want.items():
        assert got[key][:2] == (p, g)
        assert got[key][2] == pytest.approx(p / g, abs=1e-6)


def test_headline_comes_from_the_regression_tests_worst_first(synth, synth_html):
    """The fixture has no regressions table: the headline recomputes it from the stored grades with
    the pipeline's core, and shows a cell as worse only when its test says so."""
    rows = metrics(synth_html, "regression")
    want = worst_first(recompute_regressions(str(synth), 7, 28))
    assert [(r["data-workflow"], r["data-grader"], r["data-verdict"]) for r in rows] == [
        (r["workflow"], r["grader_id"], r["verdict"]) for r in want][:len(rows)]
    assert (rows[0]["data-workflow"], rows[0]["data-grader"], rows[0]["data-verdict"]) == ("alpha", "g-rate", "regressed")
    assert rows[0]["data-change-date"] == (FIRST + dt.timedelta(days=13)).isoformat(), "the planted drop's first day"
    regressed = {r["data-workflow"] for r in rows if r["data-verdict"] == "regressed"}
    assert [w["data-workflow"] for w in metrics(synth_html, "worse-workflow")] == sorted(regressed)
    assert "recomputed from the stored grades" in synth_html


def test_histograms_match_duckdb(synth, synth_html):
    bins: dict[str, list[int]] = {}
    for a in metrics(synth_html, "hist-bin"):
        bins.setdefault(a["data-grader"], []).append(int(a["data-count"]))
    finite = dict(q(synth, "SELECT grader_id, count(*) FROM grader_results WHERE isfinite(value) GROUP BY 1"))
    assert {g: sum(c) for g, c in bins.items()} == finite
    # g-count is integer valued: one bar per value 0..5, counts equal per value.
    per_value = dict(q(synth, "SELECT value::INT, count(*) FROM grader_results WHERE grader_id = 'g-count' AND value IS NOT NULL GROUP BY 1"))
    assert bins["g-count"] == [per_value.get(v, 0) for v in range(6)]
    assert len(bins["g-rate"]) == len(bins["g-info"]) == 20
    # a grader with no value on any run has no card, only a name in one line under the cards
    assert "g-never" not in bins and not [a for a in metrics(synth_html, "grader") if a["data-grader"] == "g-never"]
    assert [a["data-value"] for a in metrics(synth_html, "never-graded-graders")] == ["1"]
    assert "<code>g-never</code>" in synth_html
    thresholds = {a["data-grader"]: float(a["data-value"]) for a in metrics(synth_html, "threshold")}
    assert thresholds == {"g-rate": 0.8, "g-count": 3.0}, "informational graders have no threshold mark"
    # g-count has two thresholds with equal counts: the smaller is marked, and the card says so.
    assert "<b>2 thresholds in the data</b>, the most common is marked" in synth_html


def test_worst_runs_match_duckdb(synth, synth_html):
    want = q(synth, """
        SELECT workflow, run_id, attempt, count_if(status = 'fail') f, count_if(status = 'error') e FROM grader_results
        GROUP BY workflow, date, run_id, attempt HAVING f + e > 0
        ORDER BY f + e DESC, e DESC, date DESC, workflow, run_id, attempt LIMIT 25""")
    got = [(a["data-workflow"], a["data-run-id"], int(a["data-attempt"]), int(a["data-failed"]), int(a["data-errors"]))
           for a in metrics(synth_html, "worst-run")]
    assert got == [tuple(r) for r in want]


def test_run_links_point_to_github_actions_only_for_safe_repositories(synth_html):
    links = [a["href"] for t, a in parse(synth_html) if t == "a" and (a.get("href") or "").startswith("http")]
    assert links, "runs of octo/repo are linked"
    assert all(re.fullmatch(r"https://github\.com/octo/repo/actions/runs/\d+", h or "") for h in links)


def test_trace_reliability_and_dead_letters_match_duckdb(synth, synth_html):
    con = connect(str(synth))
    con.execute("CREATE VIEW tv AS SELECT * FROM read_parquet('" + str(synth) + "/trace_verdicts/*/*/*.parquet', hive_partitioning = true)")
    want = {(w, v): n for w, v, n in con.execute("SELECT workflow, verdict, count(*) FROM tv GROUP BY ALL").fetchall()}
    got = {(a["data-workflow"], a["data-verdict"]): int(a["data-value"]) for a in metrics(synth_html, "verdict-count")}
    assert {k: v for k, v in got.items() if v} == want
    assert len(got) == 3 * 4, "every verdict has a segment, even at zero"

    con.execute("CREATE VIEW tr AS SELECT * FROM read_parquet('" + str(synth) + "/task_reliability/*/*/*.parquet', hive_partitioning = true)")
    latest = {(w, t): (n, c, pk) for w, t, n, c, pk in con.execute("""
        SELECT workflow, task, n, c, pass_k FROM tr QUALIFY row_number() OVER (PARTITION BY workflow, task ORDER BY date DESC) = 1""").fetchall()}
    got_k = metrics(synth_html, "pass-k")
    assert got_k
    for a in got_k:
        _, _, pk = latest[(a["data-workflow"], a["data-task"])]
        assert float(a["data-value"]) == pytest.approx({p["k"]: p["pass_hat_k"] for p in pk}[int(a["data-k"])])
    assert {(a["data-workflow"], a["data-task"]) for a in metrics(synth_html, "task")} == set(latest)

    dead = {(c, s): n for c, s, n in q(synth, "SELECT error_class, stage, count(*) FROM dead_letter GROUP BY ALL")}
    assert {(a["data-error-class"], a["data-stage"]): int(a["data-value"]) for a in metrics(synth_html, "dead-letter")} == dead


def test_provenance_matches_duckdb(synth, synth_html):
    runs, dead = q(synth, "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM dead_letter)")[0]
    assert [int(a["data-value"]) for a in metrics(synth_html, "input-count")] == [runs + dead]
    configs = dict(q(synth, "SELECT config_digest, count(*) FROM runs GROUP BY 1"))
    assert {a["data-value"]: int(a["data-n"]) for a in metrics(synth_html, "config-digest")} == configs
    assert {a["data-value"] for a in metrics(synth_html, "fleetgrade-version")} == {"0.1.0"}
    impl = {r[0] for r in q(synth, "SELECT DISTINCT implementation_digest FROM grader_results")}
    assert {a["data-value"] for a in metrics(synth_html, "implementation")} == impl


def test_untrusted_text_is_escaped(synth_html):
    for raw in (HOSTILE_RUN, HOSTILE_MESSAGE, HOSTILE_REPO, "Rate <b>grader</b>", "task-1<i>"):
        assert raw not in synth_html
    assert "&lt;img src=&quot;http://evil.example/x.png&quot;" in synth_html
    assert "Rate &lt;b&gt;grader&lt;/b&gt;" in synth_html
    assert not [t for t, _ in parse(synth_html) if t in ("script", "img", "iframe", "object", "link", "base")]


def test_self_contained_no_external_resources(synth_html):
    for tag, attrs in parse(synth_html):
        assert "src" not in attrs, tag
        href = attrs.get("href")
        if href is not None and tag != "a":
            raise AssertionError(f"<{tag} href>")
        if href is not None:
            assert href.startswith(("#", "https://github.com/"))
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
    assert "@import" not in synth_html and "url(" not in synth_html
    assert "Content-Security-Policy" in synth_html


def test_deterministic_bytes(synth, synth_html, tmp_path):
    again = report(synth, html=tmp_path / "elsewhere.html")
    assert again == synth_html


def test_filters_restrict_every_section(synth, tmp_path):
    html = report(synth, "--since", "2026-10-05", "--until", "2026-10-12", "--workflow", "beta", "gamma",
                  html=tmp_path / "f.html")
    points = metrics(html, "pass-rate")
    assert {p["data-workflow"] for p in points} == {"beta", "gamma"}
    assert {p["data-date"] for p in points} == {(dt.date(2026, 10, 5) + dt.timedelta(days=i)).isoformat() for i in range(8)}
    # Undated dead letters stay in every date range; the dated one (2026-10-01) is out.
    assert {(a["data-error-class"], int(a["data-value"])) for a in metrics(html, "dead-letter")} == {("MetadataError", 1)}
    runs = q(synth, "SELECT count(*) FROM runs WHERE workflow IN ('beta', 'gamma') AND date BETWEEN '2026-10-05' AND '2026-10-12'")[0][0]
    assert [int(a["data-value"]) for a in metrics(html, "graded-runs")] == [runs]
    cells = metrics(html, "regression")
    assert cells and {r["data-workflow"] for r in cells} <= {"beta", "gamma"}


def test_absent_tables_show_no_data_sections(tmp_path):
    out = write_output(tmp_path / "out", build_rows(hostile=False), only=("grader_results",))
    html = report(out)
    nodata = {a["data-nodata"] for _, a in parse(html) if "data-nodata" in a}
    assert nodata == {"task_reliability", "trace_verdicts", "dead_letter", "cost"}  # cost reads runs
    assert metrics(html, "pass-rate") and metrics(html, "hist-bin")
    assert not [a for t, a in parse(html) if t == "a" and (a.get("href") or "").startswith("http")], "no repository, no links"


@pytest.mark.parametrize("only", [("dead_letter",), ("trace_verdicts", "task_reliability")])
def test_partial_outputs_render(tmp_path, only):
    out = write_output(tmp_path / "out", build_rows(hostile=False), only=only)
    html = report(out)
    assert {a["data-nodata"] for _, a in parse(html) if "data-nodata" in a} >= {"grader_results"}
    assert bool(metrics(html, "dead-letter")) == ("dead_letter" in only)
    assert bool(metrics(html, "verdict-count")) == ("trace_verdicts" in only)


def test_workflow_names_are_literals_not_sql(synth, tmp_path, capsys):
    name = "alpha' OR true OR '"
    # On the command line a workflow with no rows is a usage mistake (exit 2), not an empty report.
    assert main(["report", str(synth), "--html", str(tmp_path / "inj.html"), "--workflow", name]) == 2
    assert "has no rows in this output; the workflows are alpha, beta, gamma" in capsys.readouterr().err
    assert not (tmp_path / "inj.html").exists()
    # The queries take the name as a literal: it selects nothing.
    html = render(collect(str(synth), Selection(None, None, (name,))))
    assert not metrics(html, "pass-rate") and not metrics(html, "worst-run")
    assert "alpha&#x27; OR true OR &#x27;" in html


def test_no_tables_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2  # an input mistake: not an output
    assert "no fleetgrade tables" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--since", "yesterday"]) == 2  # one line, no SystemExit


def test_demo_fleet_report(demo_root, tmp_path, capsys):
    demo_output = demo_root / "demo-output"
    path = tmp_path / "report.html"
    assert main(["report", str(demo_output), "--html", str(path)]) == 0
    assert capsys.readouterr().out.strip() == str(path)
    html = path.read_text(encoding="utf-8")
    graded, dead = q(demo_output, "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM dead_letter)")[0]
    assert [int(a["data-value"]) for a in metrics(html, "input-count")] == [graded + dead]
    assert {(a["data-error-class"], int(a["data-value"])) for a in metrics(html, "dead-letter")} == {
        ("MetadataError", 3), ("NoArtifactsError", 1)}
    days = q(demo_output, "SELECT count(DISTINCT (workflow, date)) FROM grader_results")[0][0]
    assert len(metrics(html, "pass-rate")) == days == 3 * 3 + 2 * 11
    assert not [a["data-nodata"] for _, a in parse(html) if "data-nodata" in a], "every section has data"
    # The planted change (examples/make_fleet.py): found, dated, and the only finding.
    assert [a["data-workflow"] for a in metrics(html, "worse-workflow")] == ["issue-triage"]
    regressed = {a["data-grader"]: a["data-change-date"] for a in metrics(html, "regression")
                 if a["data-verdict"] == "regressed"}
    assert {"tool-success-rate", "tool-failure-count"} <= set(regressed) and set(regressed.values()) == {CHANGE_DATE}
    links = {a["href"] for t, a in parse(html) if t == "a" and (a.get("href") or "").startswith("https:")}
    run_id = q(demo_output, "SELECT run_id FROM runs ORDER BY failed DESC, errors DESC, run_id LIMIT 1")[0][0]
    assert f"https://github.com/octo-org/widgets/actions/runs/{run_id}" in links


def cells_tested(out: Path, workflow: str | None = None) -> int:
    """The cells of the regressions table that were tested (of one workflow)."""
    return q(out, "SELECT count(*) FROM regressions WHERE p_value IS NOT NULL AND workflow LIKE ?",
             [workflow or "%"])[0][0]


@pytest.mark.parametrize(("workflow", "state", "says"), [
    (None, "worse", "1 workflow got worse</b> (q ≤ 0.05, among {tested} tested cells)"),
    ("ci-doctor", "no-change", "No change detected among {tested} tested</b>"),
    ("daily-file-diet", "untested", "Not enough history to test yet (3 days of 35)</b>"),
])
def test_the_headline_says_what_the_tests_know(demo_root, tmp_path, workflow, state, says):
    """Three answers, never a reassurance the tests did not give: the demo's planted change; a
    workflow tested with no change; a workflow three days old, with no baseline."""
    html = report(demo_root / "demo-output", *(["--workflow", workflow] if workflow else []),
                  html=tmp_path / "r.html")
    [headline] = metrics(html, "headline")
    assert headline["data-state"] == state
    assert says.format(tested=cells_tested(demo_root / "demo-output", workflow)) in html
    if state == "worse":  # the workflow with no baseline yet is named, with its history
        assert "<b>Not enough history to test yet</b>: daily-file-diet (3 days of 35)." in html


def test_change_dates_only_on_changed_rows_and_never_graded_in_one_line(demo_root, tmp_path):
    html = report(demo_root / "demo-output", html=tmp_path / "r.html")
    # The whole fleet's 40 shown cells fill with tested ones; the 3-day workflow's are all too short.
    young = report(demo_root / "demo-output", "--workflow", "daily-file-diet", html=tmp_path / "young.html")
    rows = metrics(html, "regression") + metrics(young, "regression")
    assert {r["data-verdict"] for r in rows} == {"regressed", "no-change", "insufficient-data"}
    assert all(bool(r["data-change-date"]) == (r["data-verdict"] == "regressed") for r in rows)
    # graders with no value on any run: one line each in the headline and the distributions, no cards
    never = q(demo_root / "demo-output", """SELECT count(*) FROM (SELECT grader_id FROM grader_results
                                           GROUP BY ALL HAVING count(*) FILTER (WHERE isfinite(value)) = 0)""")[0][0]
    assert [int(a["data-value"]) for a in metrics(html, "never-graded-graders")] == [never] and never > 0
    assert all(int(c["data-values"]) > 0 for c in metrics(html, "grader"))
    assert "No finite values" not in html
    [line] = metrics(html, "never-graded")
    assert not {(r["data-workflow"], r["data-grader"]) for r in rows} & {("ci-doctor", "trajectory-ndtw")}
    assert int(line["data-value"]) == q(demo_root / "demo-output", """
        SELECT count(*) FROM regressions WHERE n_current = 0 AND n_baseline = 0""")[0][0] > 0
    # q beside the interval: the demo has no-change cells whose interval excludes 0
    assert any(r["data-verdict"] == "no-change" for r in rows)
    assert len(metrics(html, "stats-note")) == 1
    assert f"corrected across all {cells_tested(demo_root / 'demo-output')} tested cells" in html
    assert "a no-change cell's interval can exclude 0 at q = 1" in html


@pytest.mark.slow
def test_100k_runs_stay_fast_and_small(tmp_path):
    out = write_output(tmp_path / "big", build_rows(runs_per_day=1667, hostile=False))
    runs = q(out, "SELECT count(*) FROM runs")[0][0]
    assert runs >= 100_000
    html = report(out)  # its speed is measured by `make bench`, not asserted here
    assert len(html) < 400_000, "lists are capped and histograms binned: size does not grow with runs"
    assert len(metrics(html, "worst-run")) == 25
    assert [int(a["data-value"]) for a in metrics(html, "graded-runs")] == [runs]
