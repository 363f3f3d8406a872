"""The report's sections below the headline, one function each, from ``ReportData`` to HTML."""

from __future__ import annotations

from typing import Any

from pipeline.report import svg
from pipeline.report.html import data_attrs, esc, no_data, run_ref, section, table, td
from pipeline.report.queries import MAX_K, TRACE_LIST, WORST_RUNS, ReportData

# A grade's layer (docs/observed-graders.md): gh-aw's reference graders, or fleetgrade's observed ones.
REFERENCE, OBSERVED = "reference", "observed"


def pass_rate(data: ReportData) -> str:
    title = "Grader pass rate per workflow, per day"
    if not data.pass_rate:
        return section("pass-rate", title, no_data("grader_results", "grader_results" in data.tables))
    first = min(p["date"] for p in data.pass_rate)
    last = max(p["date"] for p in data.pass_rate)
    by_wf: dict[str, list[dict[str, Any]]] = {}
    for p in data.pass_rate:
        by_wf.setdefault(p["workflow"], []).append(p)
    cards = []
    for wf, points in by_wf.items():
        passed, gated = sum(p["passed"] for p in points), sum(p["gated"] for p in points)
        cards.append(
            f'<div class="card"><h3>{esc(wf)}</h3><div class="meta">{svg.fmt_rate(passed / gated)} of {gated:,} '
            f"gated results over {len(points)} day(s)</div>{svg.pass_rate_chart(wf, points, first, last)}</div>")
    return section("pass-rate", title, f'<div class="grid">{"".join(cards)}</div>',
                   "Passing / gated grader results per day. Hover a point for its counts.")


def graders(data: ReportData) -> str:
    title = "Grader value distributions"
    if not data.histograms:
        return section("graders", title, no_data("grader_results", "grader_results" in data.tables))
    cards = []
    for h in (h for h in data.histograms if h["n"]):
        gate = (f"pass {h['passed']:,}/{h['gated']:,} ({svg.fmt_rate(h['passed'] / h['gated'])})" if h["gated"]
                else "informational (no threshold)")
        direction = (h["direction"] or "").replace("_", " ")
        multi = (f' · <b>{h["thresholds"]} thresholds in the data</b>, the most common is marked'
                 if h["thresholds"] > 1 else "")
        layer = _layer(h)
        cards.append(
            f'<div class="card" {data_attrs(metric="grader", grader=h["grader_id"], values=h["n"], layer=layer)}>'
            f'<h3>{esc(h["name"])} <span class="muted"><code>{esc(h["grader_id"])}</code> · {layer}</span></h3>'
            f'<div class="meta">{h["n"]:,} values · {esc(h["unit"] or "no unit")} · {esc(direction)} · {gate}{multi}</div>'
            f"{svg.histogram(h)}</div>")
    legend = (f'<div class="legend"><span><i style="background:{svg.PASS}"></i>passing side of the threshold</span>'
              f'<span><i style="background:{svg.FAIL}"></i>failing side</span>'
              f'<span><i style="background:{svg.NEUTRAL}"></i>no threshold</span></div>')
    return section("graders", title, legend + f'<div class="grid">{"".join(cards)}</div>' + _never_graded(data),
                   "Finite values only (null = unavailable or error). Counts get one bar per value; "
                   "other graders 20 equal bins over the observed range and the threshold. "
                   "<i>reference</i>: gh-aw's graders, bit-exact; <i>observed</i>: fleetgrade's own, from "
                   "what the run carries (conclusion, MCP responses, safe-output errors, cached tokens).")


def _layer(h: dict[str, Any]) -> str:
    return OBSERVED if h.get("source") == "fleetgrade" else REFERENCE


def _never_graded(data: ReportData) -> str:
    """Graders with no finite value in the selection, as one line rather than a card each: they
    were unavailable (the runs lack what they read) or errored on every run."""
    never = [h for h in data.histograms if not h["n"]]
    if not never:
        return ""
    names = ", ".join(f'<code>{esc(h["grader_id"])}</code>{" (observed)" if _layer(h) == OBSERVED else ""}'
                      for h in never)
    return (f'<p class="nodata" {data_attrs(metric="never-graded-graders", value=len(never))}>{len(never)} of '
            f"{len(data.histograms)} graders have no value on any run in this selection (unavailable: the runs "
            f"lack what they read, or an error; docs/observed-graders.md says what each observed "
            f"grader reads): {names}.</p>")


def worst_runs(data: ReportData) -> str:
    title = "Runs to look at: most failures and errors"
    if not data.worst_runs:
        present = "grader_results" in data.tables
        return section("worst-runs", title, no_data("grader_results", present) if not present
                       else '<p class="nodata">No run has a failing or erroring grader.</p>')
    body = table(
        ["workflow", "date", "run", ("failed", "num"), ("errors", "num"), ("graders", "num"), "failing graders"],
        (f'<tr {data_attrs(metric="worst-run", workflow=r["workflow"], run_id=r["run_id"], attempt=r["attempt"], failed=r["failed"], errors=r["errors"])}>'
         f'{td(r["workflow"])}{td(r["date"])}<td>{run_ref(r["run_id"], r["attempt"], r["repository"])}</td>'
         f'{td(r["failed"], "num")}{td(r["errors"], "num")}{td(r["graders"], "num")}'
         f'<td>{", ".join(f"<code>{esc(g)}</code>" for g in r["failing"] or [])}</td></tr>'
         for r in data.worst_runs), "worst-runs wide")
    return section("worst-runs", title, body, f"At most {WORST_RUNS} runs, most failed + errored graders first.")


def reliability(data: ReportData) -> str:
    title = "Task reliability: pass^k over reruns"
    if not data.reliability:
        return section("reliability", title, no_data("task_reliability", "task_reliability" in data.tables))
    ks = sorted({p["k"] for r in data.reliability for p in (r["pass_k"] or []) if p["k"] <= MAX_K})
    rows = []
    for r in data.reliability:
        by_k = {p["k"]: p["pass_hat_k"] for p in (r["pass_k"] or [])}
        cells = "".join(
            f"<td>{svg.meter(by_k.get(k), f'pass^{k}', data_attrs(metric='pass-k', workflow=r['workflow'], task=r['task'], k=k, value=by_k[k]) if by_k.get(k) is not None else '')}</td>"
            for k in ks)
        strict = '<span class="badge ok">pass</span>' if r["pass_hat_k_strict"] else '<span class="badge fail">FAIL</span>'
        rows.append(f'<tr {data_attrs(metric="task", workflow=r["workflow"], task=r["task"], n=r["n"], c=r["c"])}>'
                    f'{td(r["workflow"])}<td><code>{esc(r["task"])}</code></td>{td(r["date"])}'
                    f'{td(r["n"], "num")}{td(r["c"], "num")}<td>{strict}</td>{cells}</tr>')
    note = (f"Each task's latest day in the selection, least reliable first ({len(data.reliability)} of "
            f"{data.reliability_total} tasks). pass^k = C(c,k)/C(n,k): the chance that k reruns all succeed; "
            "strict = all provided runs delivered (trace-grader's gate).")
    return section("reliability", title, table(
        ["workflow", "task", "date", ("n", "num"), ("c", "num"), "strict", *[f"pass^{k}" for k in ks]], rows), note)


def verdicts(data: ReportData) -> str:
    title = "Trace verdicts"
    if not data.verdicts:
        return section("verdicts", title, no_data("trace_verdicts", "trace_verdicts" in data.tables))
    by_wf: dict[str, dict[str, int]] = {}
    for v in data.verdicts:
        by_wf.setdefault(v["workflow"], {})[v["verdict"]] = v["n"]
    legend = '<div class="legend">' + "".join(
        f'<span><i style="background:{svg.VERDICT_COLORS[v]}"></i>{v}</span>' for v in svg.VERDICTS) + "</div>"
    rows = (f"<tr>{td(wf)}<td>{svg.verdict_bar(wf, c)}</td>"
            + "".join(td(c.get(v, 0), "num") for v in svg.VERDICTS) + "</tr>" for wf, c in by_wf.items())
    body = legend + table(["workflow", "", *[(v, "num") for v in svg.VERDICTS]], rows, "verdicts")
    if data.flags:
        body += "<h3>Most frequent flags</h3>" + table(
            ["check", "severity", ("runs", "num")],
            (f"<tr><td><code>{esc(f['check'])}</code></td>{td(f['severity'])}{td(f['n'], 'num')}</tr>" for f in data.flags))
    if data.corrupt_runs:
        body += (f"<h3>Corrupt successes and failures ({len(data.corrupt_runs)} of {data.trace_counts[1]:,}, "
                 f"at most {TRACE_LIST}; {data.trace_counts[0]:,} traced runs)</h3>") + table(
            ["verdict", "workflow", "date", "run", "task", ("flags", "num"), "checks"],
            (f'<tr {data_attrs(metric="trace-run", run_id=r["run_id"], verdict=r["verdict"])}>{td(r["verdict"])}'
             f'{td(r["workflow"])}{td(r["date"])}<td>{run_ref(r["run_id"], r["attempt"], r["repository"])}</td>{td(r["task"])}'
             f'{td(r["flags"], "num")}<td>{", ".join(esc(c) for c in r["checks"] or [])}</td></tr>'
             for r in data.corrupt_runs))
    return section("verdicts", title, body)


def dead_letters(data: ReportData) -> str:
    title = "Dead letters: inputs that could not be graded"
    if not data.dead_letters:
        return section("dead-letters", title, no_data("dead_letter", "dead_letter" in data.tables))
    body = table(
        ["error class", "stage", ("inputs", "num"), ("workflows", "num"), "example"],
        (f'<tr {data_attrs(metric="dead-letter", error_class=d["error_class"], stage=d["stage"], value=d["n"])}>'
         f'<td><code>{esc(d["error_class"])}</code></td>{td(d["stage"])}{td(d["n"], "num")}{td(d["workflows"], "num")}'
         f'<td class="msg"><code>{esc(d["example_input"])}</code><br>{esc(d["example_message"])}</td></tr>'
         for d in data.dead_letters), "dead-letters wide")
    return section("dead-letters", title, body)


def provenance(data: ReportData) -> str:
    ov = data.overview
    graded, dead = ov["graded"], ov["dead"]
    inputs = (graded or 0) + (dead or 0)
    kpis = (f'<div class="kpis"><div class="kpi" {data_attrs(metric="input-count", value=inputs)}><b>{inputs:,}</b>inputs</div>'
            f'<div class="kpi" {data_attrs(metric="graded-runs", value=graded or 0)}><b>{graded or 0:,}</b>graded runs</div>'
            f'<div class="kpi" {data_attrs(metric="dead-letters", value=dead or 0)}><b>{dead or 0:,}</b>dead letters</div></div>')
    body = kpis + f'<p class="muted">Tables present: {esc(", ".join(sorted(data.tables)) or "none")}. Selection: {esc(data.selection.describe())}.</p>'
    if data.versions:
        body += "<h3>fleetgrade versions</h3>" + table(
            ["table", "version", ("rows", "num")],
            (f'<tr {data_attrs(metric="fleetgrade-version", table=v["tbl"], value=v["version"], rows=v["n"])}>'
             f'{td(v["tbl"])}<td><code>{esc(v["version"])}</code></td>{td(v["n"], "num")}</tr>' for v in data.versions))
    if data.configs:
        unit = "runs" if "runs" in data.tables else "results"
        body += "<h3>Grader configuration digests</h3>" + table(
            ["config digest", (unit, "num"), ("workflows", "num"), "first", "last"],
            (f'<tr {data_attrs(metric="config-digest", value=c["config_digest"], n=c["n"])}>'
             f'<td class="digest">{esc(c["config_digest"])}</td>{td(c["n"], "num")}{td(c["workflows"], "num")}'
             f'{td(c["first"])}{td(c["last"])}</tr>' for c in data.configs))
    if "grader_drift" in data.tables:
        body += "<h3>Archived grades that fleetgrade does not repeat (grader_drift)</h3>" + (table(
            ["grader", ("rows", "num"), ("runs", "num")],
            (f'<tr {data_attrs(metric="grader-drift", grader=d["grader_id"], value=d["n"])}>'
             f'<td><code>{esc(d["grader_id"])}</code></td>{td(d["n"], "num")}{td(d["runs"], "num")}</tr>'
             for d in data.drift)) if data.drift else '<p class="nodata">No drift in the selection.</p>')
    if data.implementations:
        body += "<h3>Grader implementations</h3>" + table(
            ["grader", "implementation", "digest", ("results", "num")],
            (_implementation_row(i) for i in data.implementations))
    return section("provenance", "Provenance", body, "Inputs = graded runs + dead letters.")


def _implementation_row(i: dict[str, Any]) -> str:
    impl = f"{i['implementation_id']} v{i['implementation_version']}"
    return (f'<tr {data_attrs(metric="implementation", grader=i["grader_id"], value=i["implementation_digest"])}>'
            f'<td><code>{esc(i["grader_id"])}</code></td>{td(impl)}'
            f'<td class="digest">{esc(i["implementation_digest"])}</td>{td(i["results"], "num")}</tr>')
