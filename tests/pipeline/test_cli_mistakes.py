"""Every mistake of issue 29 through the real ``fleetgrade`` executable: a non-zero exit and one line
``fleetgrade <command>: <what> (<where>)``, never a traceback. Each is caught before any run is read,
so no case starts a pipeline (the two allowed-empty and dry-run cases build one and run nothing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO
from tests.pipeline.test_gcs import BUCKET, client, gcs_proxy, gcs_server  # noqa: F401 (fixtures)

EXE = Path(sys.executable).parent / "fleetgrade"
RUN = REPO / "examples" / "fleet" / "ci-doctor" / "run-7100403"
TIMEOUT = 120


def fleetgrade(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *argv], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
                          check=False, env=dict(os.environ))


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A one-run fleet, an empty folder, a file, graders files with a broken inline script, a tiny output."""
    base = tmp_path_factory.mktemp("mistakes")
    fleet = base / "fleet"
    shutil.copytree(RUN, fleet / "ci-doctor" / RUN.name)
    (base / "empty").mkdir()
    (base / "notes.md").write_text("not a fleet\n")
    bad = "graders:\n  my-metric:\n    script: |\n      const n = trace.toolCalls.length;\n      return { value: n +;\n"
    (base / "bad.yaml").write_text(bad)
    (base / "typo.yaml").write_text("tool-success-rate: {threshhold: 0.9}\n")
    (base / "comments.yaml").write_text("# every built-in, later\n")
    (base / "latin1.yaml").write_bytes("tool-success-rate: {threshold: 0.9}  # réglé\n".encode("latin-1"))
    (base / "unknown-id.yaml").write_text("graders:\n  tool-sucess-rate: {threshold: 0.9}\n")
    (base / "graders-dir").mkdir()
    (base / "graders-dir" / "ci-doctor.yaml").write_text(bad.replace("my-metric", "dir-metric"))
    out = base / "tables"  # one partition is enough for `sql` to open the output
    part = out / "runs" / "workflow=w" / "date=2026-01-01"
    part.mkdir(parents=True)
    pq.write_table(pa.table({"run_id": ["1"]}), part / "part-00000.parquet")
    graded = base / "graded"  # what `run` leaves: a _state partition and the tables'
    for table in ("_state", "grader_results"):
        folder = graded / table / "workflow=w" / "date=2026-01-01"
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"run_id": ["1"]}), folder / "part-00000.parquet")
    traces = {"runs": [{"task": f"T{i}", "ok": 1, "steps": [{"step": 1, "tool": "Read"}]} for i in range(3000)]}
    (base / "traces.json").write_text(json.dumps(traces))
    return {"base": base, "fleet": fleet, "empty": base / "empty", "file": base / "notes.md",
            "typo": base / "typo.yaml", "comments": base / "comments.yaml", "latin1": base / "latin1.yaml", "unknown_id": base / "unknown-id.yaml",
            "bad": base / "bad.yaml", "bad_dir": base / "graders-dir", "tables": out, "graded": graded,
            "traces": base / "traces.json"}


def one_line(proc: subprocess.CompletedProcess[str], command: str) -> str:
    """The single stderr line the mistake became (Beam may log at INFO before it)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("fleetgrade")]
    assert len(ours) == 1, proc.stderr
    assert ours[0].startswith(f"fleetgrade {command}: " if command else "fleetgrade: "), ours[0]
    return ours[0]


Args = Callable[[dict[str, Path]], list[str]]


def _run(*extra: str) -> Args:
    return lambda p: ["run", "--input", str(p["fleet"]), "--output", str(p["base"] / "out"), *extra]


# (id, argv from the fixture places, exit code, the message's text (a regex))
MISTAKES: list[tuple[str, Args, int, str]] = [
    ("typo-in-flag", _run("--graders-dri", "examples/graders"), 2,
     r"unknown flag --graders-dri; did you mean --graders-dir\?$"),
    ("unknown-flag", _run("--frobnicate"), 2, r"unknown flag --frobnicate$"),
    # Named as the typo it is, not as the required flag it left missing.
    ("typo-in-a-required-flag", lambda p: ["run", "--inptu", str(p["fleet"]), "--output", str(p["base"] / "out")], 2,
     r"unknown flag --inptu; did you mean --input\?$"),
    ("regrade-typo-in-a-required-flag", lambda p: ["regrade", "--evidence_at", "2026-12-01T00:00:00Z", "--input",
                                                   str(p["fleet"]), "--output", str(p["base"] / "o")],
     2, r"unknown flag --evidence_at; did you mean --evidence-at\?$"),
    ("bigquery-ddl-typo-in-a-required-flag", lambda p: ["bigquery-ddl", str(p["tables"]), "--datset", "ds"], 2,
     r"unknown flag --datset; did you mean --dataset\?$"),
    ("abbreviation", _run("--ful"), 2, r"unknown flag --ful; did you mean --full\?$"),
    ("beam-flag-of-another-runner", _run("--flink_master", "x"), 2, r"unknown flag --flink_master"),
    ("beam-flag-bad-value", _run("--num_workers", "many"), 2, r"argument --num_workers: invalid int value"),
    ("regrade-unknown-flag", lambda p: ["regrade", "--evidence-at", "2026-12-01T00:00:00Z", "--input",
                                        str(p["fleet"]), "--output", str(p["base"] / "o"), "--frobnicate"],
     2, r"unknown flag --frobnicate$"),
    ("sql-unknown-flag", lambda p: ["sql", str(p["tables"]), "SELECT 1", "--fromat", "csv"], 2,
     r"unknown flag --fromat; did you mean --format\?$"),
    ("unknown-command", lambda p: ["rnu"], 2, r"unknown command 'rnu'; did you mean run\?$"),
    ("missing-input", lambda p: ["run", "--output", str(p["base"] / "out")], 2,
     r"the following arguments are required: --input$"),
    ("input-missing", lambda p: ["run", "--input", "/nonexistent/fleet", "--output", str(p["base"] / "out")], 2,
     r"--input does not exist \(/nonexistent/fleet\)$"),
    ("input-is-a-file", lambda p: ["run", "--input", str(p["file"]), "--output", str(p["base"] / "out")], 2,
     r"--input is a file, not a fleet folder \(.*notes\.md\)$"),
    ("input-holds-no-run", lambda p: ["run", "--input", str(p["empty"]), "--output", str(p["base"] / "out")], 2,
     r"--input holds no run folder .*--allow-empty.*\(.*empty\)$"),
    ("regrade-input-holds-no-run", lambda p: ["regrade", "--evidence-at", "2026-12-01T00:00:00Z", "--input",
                                              str(p["empty"]), "--output", str(p["base"] / "o")],
     2, r"--input holds no run folder"),
    ("inverted-window", _run("--since", "2026-12-01", "--until", "2026-11-01"), 2,
     r"--since 2026-12-01 is after --until 2026-11-01"),
    ("inline-js-syntax-error", lambda p: [*_run("--graders", str(p["bad"]))(p)], 2,
     r"inline grader 'my-metric' does not compile: SyntaxError: Unexpected token ';' "
     r"\(.*bad\.yaml: graders\.my-metric\.script, line 2\)$"),
    ("inline-js-syntax-error-graders-dir", lambda p: [*_run("--graders-dir", str(p["bad_dir"]))(p)], 2,
     r"inline grader 'dir-metric' does not compile: SyntaxError: .*ci-doctor\.yaml: graders\.dir-metric\.script"),
    ("graders-unknown-field", lambda p: _run("--graders", str(p["typo"]))(p), 2,
     r'typo\.yaml: graders\.tool-success-rate has an unknown field "threshhold"; did you mean "threshold"\?'),
    # An unreadable graders file: one line naming it once and why.
    ("graders-not-utf8", lambda p: _run("--graders", str(p["latin1"]))(p), 2,
     r"run: \S*latin1\.yaml: cannot read the graders configuration: not UTF-8 text \(byte 0xe9 at offset 40\)$"),
    ("graders-is-a-folder", lambda p: _run("--graders", str(p["empty"]))(p), 2,
     r"run: \S*empty: cannot read the graders configuration: Is a directory$"),
    ("graders-missing", _run("--graders", "/nonexistent/graders.yaml"), 2,
     r"run: /nonexistent/graders\.yaml: cannot read the graders configuration: No such file or directory$"),
    ("graders-empty-file", lambda p: _run("--graders", str(p["comments"]))(p), 2,
     r"comments\.yaml: the graders configuration is empty"),
    ("graders-unknown-id", lambda p: _run("--graders", str(p["unknown_id"]))(p), 2,
     r'graders\.tool-sucess-rate is not a built-in grader .*; did you mean "tool-success-rate"\? Configurable ids: '
     r".*skill-constraint-coverage.*code-search-recall, operational-value"),
    ("output-is-a-file", lambda p: ["run", "--input", str(p["fleet"]), "--output", str(p["file"])], 2,
     r"--output is a file, not a folder \(.*notes\.md\)$"),
    ("output-under-a-file", lambda p: ["run", "--input", str(p["fleet"]), "--output", str(p["file"] / "x")], 2,
     r"--output cannot be created: .*notes\.md is a file"),
    ("output-not-writable", lambda p: ["run", "--input", str(p["fleet"]), "--output", _unwritable(p)], 2,
     r"--output is not writable: "),
    ("unknown-runner", _run("--runner", "nosuchrunner"), 2,
     r"unknown runner 'nosuchrunner'; fleetgrade runs on direct, direct-multiprocess, portable, dataflow"),
    # The README's pyarrow snippet counted 3,604 rows of grader_results instead of 1,077 after this.
    ("output-is-a-table-folder-of-an-output", lambda p: ["run", "--input", str(p["fleet"]), "--output",
                                                         str(p["graded"] / "grader_results")], 2,
     r"--output is inside the fleetgrade output .*graded \(its grader_results table\); .* give .*graded itself"),
    ("output-inside-an-output", lambda p: ["regrade", "--evidence-at", "2026-12-01T00:00:00Z", "--input",
                                           str(p["fleet"]), "--output", str(p["graded"] / "more" / "out")], 2,
     r"--output is inside the fleetgrade output .*graded; "),
    ("input-is-an-output", lambda p: ["run", "--input", str(p["graded"]), "--output", str(p["base"] / "out")], 2,
     r"--input is a fleetgrade output: it holds tables, not runs"),
    ("input-inside-an-output", lambda p: ["run", "--input", str(p["graded"] / "_state"), "--output",
                                          str(p["base"] / "out")], 2,
     r"--input is inside the fleetgrade output .*graded \(its _state table\): it holds tables"),
    ("output-inside-input", lambda p: ["run", "--input", str(p["fleet"]), "--output", str(p["fleet"] / "out")], 2,
     r"--output is inside --input"),
    ("output-is-input", lambda p: ["run", "--input", str(p["fleet"]), "--output", str(p["fleet"]) + "/"], 2,
     r"--output is inside --input"),
    ("portable-without-job-endpoint", _run("--runner", "PortableRunner"), 2,
     r"the portable runner needs --job_endpoint HOST:PORT .*\(--runner portable\)$"),
    # "b" is no valid bucket name: Beam says so without looking for credentials on the network.
    ("dataflow-without-project", lambda p: ["run", "--input", "gs://b/fleet", "--output", "gs://b/graded",
                                            "--runner", "dataflow", "--temp_location", "gs://b/tmp"], 2,
     r"Beam options: (.*; )?Missing required option: project; .*\(--runner dataflow\)$"),
    ("dataflow-local-paths", _run("--runner", "DataflowRunner"), 2,
     r"the dataflow runner's workers read and write gs:// only; --input is local"),
    ("bigquery-ddl-local", lambda p: ["bigquery-ddl", str(p["tables"]), "--dataset", "ds"], 2,
     r"BigQuery reads external tables from gs:// only.*--local-uris"),
    ("report-inverted-window", lambda p: ["report", str(p["tables"]), "--since", "2026-02-01", "--until",
                                          "2026-01-01"], 2, r"--since 2026-02-01 is after --until 2026-01-01$"),
    ("report-bad-date", lambda p: ["report", str(p["tables"]), "--since", "yesterday"], 2,
     r"argument --since: not a YYYY-MM-DD date"),
    # Not DuckDB fetching an extension from the network, then failing on credentials it cannot use.
    ("sql-gcs-output", lambda p: ["sql", "gs://some-bucket/graded", "SELECT 1"], 2,
     r"reads a local output folder \(copy the tables from gs:// first\) \(gs://some-bucket/graded\)$"),
    ("sql-not-an-output", lambda p: ["sql", str(p["empty"]), "SELECT 1"], 2, r"no fleetgrade tables found"),
    ("sql-bad-query", lambda p: ["sql", str(p["tables"]), "SELECT nope FROM runs"], 2, r"Binder Error"),
]


def _unwritable(p: dict[str, Path]) -> str:
    if os.geteuid() == 0:  # root writes through any mode bits; /proc refuses new files
        return "/proc/fleetgrade-output"
    locked = p["base"] / "locked"
    locked.mkdir(exist_ok=True)
    locked.chmod(0o500)
    return str(locked / "out")


@pytest.mark.parametrize(("argv", "code", "message"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_mistake_is_one_line_and_non_zero(places, argv, code, message):
    args = argv(places)
    proc = fleetgrade(*args)
    line = one_line(proc, args[0] if args[0] != "rnu" else "rnu")
    assert proc.returncode == code, proc.stderr
    assert re.search(message, line), line
    assert not (places["base"] / "out").exists(), "nothing may be written before the checks pass"


def test_allow_empty_accepts_an_empty_fleet(places, tmp_path):
    proc = fleetgrade("run", "--input", str(places["empty"]), "--output", str(tmp_path / "o"), "--allow-empty",
                      "--dry_run=True")
    assert proc.returncode == 0, proc.stderr
    assert f"input {places['empty']} (empty, allowed)" in proc.stdout


def test_bigquery_ddl_local_uris_on_request(places):
    proc = fleetgrade("bigquery-ddl", str(places["tables"]), "--dataset", "ds", "--local-uris")
    assert proc.returncode == 0, proc.stderr
    assert "CREATE EXTERNAL TABLE" in proc.stdout


def test_dry_run_says_so_and_what_was_validated(places, tmp_path):
    out = tmp_path / "out"
    proc = fleetgrade(*_run("--dry_run=True", "--job_name", "nightly", "--graders", "examples/graders/issue-triage.md")(
        {**places, "base": tmp_path}))
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("fleetgrade run: dry run, nothing was read from any run or written; validated "), line
    for checked in ("graders (2 inline script(s) compiled)", f"output {out} writable",
                    f"input {places['fleet']} holds runs", "the pipeline graph was built, not run"):
        assert checked in line, line
    assert not out.exists()


@pytest.mark.parametrize("argv", [
    ["sql", "{tables}", "SELECT * FROM range(300000)", "--format", "csv"],
    ["sql", "{tables}", "SELECT * FROM range(300000)"],
    ["trace", "--traces", "{traces}", "--json"],
    ["trace", "--traces", "{traces}"],
], ids=["sql-csv", "sql-table", "trace-json", "trace-human"])
def test_closed_pipe_exits_quietly(places, argv):
    """``… | head -1``: exit 0 or 141 (SIGPIPE's status), nothing on stderr."""
    args = [a.format(**{k: str(v) for k, v in places.items()}) for a in argv]
    with subprocess.Popen([str(EXE), *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # the reader goes away, as `head -1` does
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=TIMEOUT)
    assert code in (0, 141), err
    assert err == ""


# -- gs:// (a real GCS JSON API server on loopback) ---------------------------------------------

@pytest.fixture(scope="module")
def gcs_fleet(gcs_server) -> Iterator[str]:  # noqa: F811 (the fixture imported above)
    bucket = client().bucket(BUCKET)
    for path in sorted(RUN.rglob("*")):
        if path.is_file():
            bucket.blob(f"mistakes-fleet/ci-doctor/{RUN.name}/{path.relative_to(RUN).as_posix()}"
                        ).upload_from_filename(str(path))
    yield f"gs://{BUCKET}/mistakes-fleet"


GCS_MISTAKES: list[tuple[str, Callable[[str, Path], list[str]], str]] = [
    ("gs-input-holds-no-run", lambda f, t: ["--input", f"gs://{BUCKET}/nothing-here", "--output", str(t / "o")],
     rf"--input holds no run folder .*\(gs://{BUCKET}/nothing-here\)$"),
    ("gs-input-bucket-missing", lambda f, t: ["--input", "gs://no-such-bucket/fleet", "--output", str(t / "o")],
     r"the bucket of --input does not exist \(gs://no-such-bucket\)$"),
    ("gs-output-bucket-missing", lambda f, t: ["--input", f, "--output", "gs://no-such-bucket/graded"],
     r"the bucket of --output does not exist \(gs://no-such-bucket\)$"),
    ("gs-output-inside-input", lambda f, t: ["--input", f, "--output", f + "/graded"], r"--output is inside --input"),
]


@pytest.mark.parametrize(("argv", "message"), [m[1:] for m in GCS_MISTAKES], ids=[m[0] for m in GCS_MISTAKES])
def test_gcs_mistake_is_one_line_and_non_zero(gcs_fleet, tmp_path, argv, message):
    proc = fleetgrade("run", *argv(gcs_fleet, tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert re.search(message, one_line(proc, "run"))


def test_gcs_dataflow_dry_run_checks_the_bucket_and_leaves_nothing(gcs_fleet):
    proc = fleetgrade("run", "--input", gcs_fleet, "--output", f"gs://{BUCKET}/dry-graded", "--runner", "dataflow",
                      "--project", "fleet-project", "--region", "us-central1",
                      "--temp_location", f"gs://{BUCKET}/tmp", "--dry_run=True")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert f"output gs://{BUCKET}/dry-graded writable" in line and f"input {gcs_fleet} holds runs" in line, line
    assert line.endswith("the Dataflow job request was built, not submitted"), line
    assert not list(client().list_blobs(BUCKET, prefix="dry-graded")), "the write test object must be deleted"
    assert not list(client().list_blobs(BUCKET, prefix="tmp")), "a dry run stages nothing"
