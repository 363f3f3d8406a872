"""`fleetgrade run` from gs:// to gs:// against a real GCS JSON API server on loopback.

The server is fake-gcs-server behind a proxy that can hold each request (tools/gcs_server.py), on
free loopback ports; the storage layer is not mocked.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from tests.conftest import REPO
from tools.gcs_server import DROP, Proxy, free_port, kind, serve

FLEET = REPO / "examples" / "fleet"
BUCKET = "fleet-bucket"


# Every gs:// test runs against the server on loopback as it is, and with 30 ms held on each
# request, as a bucket in another zone would (issue 39).
LATENCIES_MS = (0, 30)


@pytest.fixture(scope="module", params=LATENCIES_MS, ids=[f"{ms}ms" for ms in LATENCIES_MS])
def gcs_proxy(request: pytest.FixtureRequest) -> Iterator[tuple[str, Proxy]]:
    """fake-gcs-server (tools/gcs_server.py) behind the latency proxy; STORAGE_EMULATOR_HOST names it."""
    with serve((BUCKET,), latency=request.param / 1000) as (url, proxy):
        old = os.environ.get("STORAGE_EMULATOR_HOST")
        os.environ["STORAGE_EMULATOR_HOST"] = url
        try:
            yield url, proxy
        finally:
            if old is None:
                os.environ.pop("STORAGE_EMULATOR_HOST", None)
            else:
                os.environ["STORAGE_EMULATOR_HOST"] = old


@pytest.fixture(scope="module")
def gcs_server(gcs_proxy: tuple[str, Proxy]) -> str:
    return gcs_proxy[0]


def upload_tree(root: Path, prefix: str, bucket_name: str = BUCKET) -> None:
    bucket = client().bucket(bucket_name)
    files = [p for p in sorted(root.rglob("*")) if p.is_file()]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: bucket.blob(f"{prefix}/{p.relative_to(root).as_posix()}").upload_from_filename(str(p)),
                      files))


def client():  # type: ignore[no-untyped-def]
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(credentials=AnonymousCredentials(), project="fleetgrade-test")


def test_run_gs_to_gs(gcs_server, tmp_path):
    c = client()
    bucket = c.bucket(BUCKET)
    upload_tree(FLEET, "fleet")

    assert main(["run", "--input", f"gs://{BUCKET}/fleet", "--output", f"gs://{BUCKET}/graded",
                 "--log-level", "WARNING"]) == 0

    names = sorted(b.name for b in c.list_blobs(BUCKET, prefix="graded/"))
    assert names, "nothing written to the bucket"
    assert not [n for n in names if "_staging" in n]
    assert all(n.endswith("/part-00000.parquet") for n in names)
    results = [n for n in names if n.startswith("graded/grader_results/")]
    assert {n.split("/")[2] for n in results} == {"workflow=ci-doctor", "workflow=daily-file-diet",
                                                  "workflow=issue-triage"}

    # Read the Parquet back from the bucket and compare with a local run of the same fleet.
    local = tmp_path / "local"
    assert main(["run", "--input", str(FLEET), "--output", str(local), "--log-level", "WARNING"]) == 0
    for name in names:
        data = bucket.blob(name).download_as_bytes()
        table = pq.read_table(io.BytesIO(data))
        local_file = local / name.removeprefix("graded/")
        assert table.num_rows > 0
        if "/_state/" in name:
            continue  # run folders and their listings (paths, mtimes) differ by nature
        if "/runs/" in name or "/dead_letter/" in name:
            # These name the input folder, which differs (gs://… vs a local path).
            path_cols = ["root"] if "/runs/" in name else ["input", "message"]
            assert table.drop_columns(path_cols) == pq.read_table(local_file).drop_columns(path_cols)
        else:
            assert data == local_file.read_bytes(), name


def test_regrade_gs_to_gs(gcs_server, tmp_path):
    """``fleetgrade regrade`` reads and writes gs:// too; observations hold no path, so bytes match local."""
    bucket = client().bucket(BUCKET)
    local_fleet = tmp_path / "fleet"
    for run in sorted((FLEET / "daily-file-diet").glob("run-71002*")):
        shutil.copytree(run, local_fleet / "daily-file-diet" / run.name)
    upload_tree(local_fleet, "regrade-fleet")
    flags = ["--evidence-at", "2026-12-01T00:00:00Z", "--log-level", "WARNING"]
    assert main(["regrade", "--input", f"gs://{BUCKET}/regrade-fleet", "--output", f"gs://{BUCKET}/regraded",
                 *flags]) == 0
    local = tmp_path / "local"
    assert main(["regrade", "--input", str(local_fleet), "--output", str(local), *flags]) == 0
    names = sorted(b.name for b in client().list_blobs(BUCKET, prefix="regraded/"))
    expected = sorted(str(p.relative_to(local)) for p in local.rglob("*.parquet"))
    assert [n.removeprefix("regraded/") for n in names] == expected
    assert expected and all(n.startswith("observations/") for n in expected)
    for name in names:
        assert bucket.blob(name).download_as_bytes() == (local / name.removeprefix("regraded/")).read_bytes()


def test_gs_without_credentials_is_one_line_naming_how_to_provide_them(tmp_path):
    """Issue 42: no Application Default Credentials (or a key file that is missing or not one), no
    emulator and the metadata server unreachable (pointed at a closed loopback port, so nothing
    leaves the machine): one line saying how to authenticate and naming the gs:// place, at once
    (no retried lookup, no Beam traceback)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT")}
    closed = f"127.0.0.1:{free_port()}"
    env.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"), GCE_METADATA_HOST=closed,
               GCE_METADATA_IP=closed)
    exe = Path(sys.executable).parent / "fleetgrade"
    not_json = tmp_path / "key.json"
    not_json.write_text("not a key\n")
    for key, args, said in (
        (None, ["--input", "gs://no-credentials-bucket/fleet", "--output", str(tmp_path / "out")],
         "no Google credentials found for gs://: "),
        # A key file named but unusable: which, and why.
        (not_json, ["--input", "gs://no-credentials-bucket/fleet", "--output", str(tmp_path / "out")],
         f"GOOGLE_APPLICATION_CREDENTIALS cannot be used for gs:// (File {not_json} is not a valid json file): "),
        (tmp_path / "gone.json", ["--input", str(FLEET), "--output", "gs://no-credentials-bucket/graded"],
         f"GOOGLE_APPLICATION_CREDENTIALS cannot be used for gs:// (File {tmp_path / 'gone.json'} was not found): "),
    ):
        run_env = dict(env, **({"GOOGLE_APPLICATION_CREDENTIALS": str(key)} if key else {}))
        proc = subprocess.run([str(exe), "run", *args], capture_output=True, text=True, env=run_env, timeout=90)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
        line = proc.stderr.strip()
        assert line.startswith(f"fleetgrade run: {said}"), line
        for way in ("gcloud auth application-default login", "GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST"):
            assert way in line
        place = next(a for a in args if a.startswith("gs://"))
        assert line.endswith(f" ({place})"), line  # the gs:// place that needs them
    assert not (tmp_path / "out").exists()


class _Flaky:
    """The first try of every request (listings, downloads, uploads, deletes, the lock's
    compare-and-swap) is answered 429, 500 or 503 or has its connection dropped, in turn; every
    download of the broken run's files fails always (503), and so does every listing of the
    unlistable workflow folder."""

    FIRST = (429, 500, 503, DROP)

    def __init__(self, broken: str, unlistable: str) -> None:
        self.broken, self.unlistable = broken, unlistable
        self.seen: set[tuple[str, str]] = set()
        self.injected: Counter[int] = Counter()

    def __call__(self, method: str, path: str) -> int | None:
        what = kind(method, path)
        if (self.broken in path and what == "media") or (self.unlistable in path and what == "list"):
            self.injected[503] += 1
            return 503
        if (method, path) in self.seen:
            return None
        self.seen.add((method, path))
        status = self.FIRST[len(self.seen) % len(self.FIRST)]
        self.injected[status] += 1
        return status


def test_transient_failures_are_retried_and_what_keeps_failing_is_its_own_dead_letter(tmp_path, monkeypatch):
    """Issue 39: every request fails once (429, 500, 503 or a dropped connection) and is retried
    with back-off; the files of one run keep failing, and so does the listing of one workflow
    folder: each is a dead letter naming the object and the error after its retries, and the job
    grades the other runs as it would without faults (inputs = graded + dead-lettered)."""
    fleet = tmp_path / "fleet"
    runs = sorted((FLEET / "ci-doctor").glob("run-7*"))[:3]
    for run in runs:
        shutil.copytree(run, fleet / "ci-doctor" / run.name)
    unlisted = sorted((FLEET / "issue-triage").glob("run-*"))[0]
    shutil.copytree(unlisted, fleet / "issue-triage" / unlisted.name)
    broken = runs[1].name
    flaky = _Flaky(f"%2F{broken}%2F", "prefix=flaky-fleet%2Fissue-triage%2F&")
    monkeypatch.setenv("FLEETGRADE_GCS_RETRY_SECONDS", "2")
    with serve((BUCKET,), fault=flaky) as (url, _):
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        upload_tree(fleet, "flaky-fleet")
        flaky.seen.clear()
        flaky.injected.clear()
        assert main(["run", "--input", f"gs://{BUCKET}/flaky-fleet", "--output", f"gs://{BUCKET}/flaky-out",
                     "--log-level", "ERROR"]) == 0
        tables: dict[str, list[pa.Table]] = {}
        for blob in client().list_blobs(BUCKET, prefix="flaky-out/"):
            table = blob.name.split("/")[1]
            tables.setdefault(table, []).append(pq.read_table(io.BytesIO(blob.download_as_bytes())))
    assert all(flaky.injected[status] > 10 for status in _Flaky.FIRST), flaky.injected
    graded = sorted(r["run_id"] for t in tables["runs"] for r in t.to_pylist())
    assert graded == sorted(r.name.removeprefix("run-") for r in runs if r.name != broken)
    dead = {r["input"]: r for t in tables["dead_letter"] for r in t.to_pylist()}
    assert sorted(dead) == [f"gs://{BUCKET}/flaky-fleet/ci-doctor/{broken}", f"gs://{BUCKET}/flaky-fleet/issue-triage"]
    for row in dead.values():
        assert row["error_class"] == "StorageError"
        assert row["message"].endswith("still failing after retrying for 2 s (HTTP 503)"), row["message"]
    assert f"gs://{BUCKET}/flaky-fleet/ci-doctor/{broken}/" in dead[f"gs://{BUCKET}/flaky-fleet/ci-doctor/{broken}"]["message"]
    assert dead[f"gs://{BUCKET}/flaky-fleet/issue-triage"]["message"].startswith(f"gs://{BUCKET}/flaky-fleet/issue-triage/:")
