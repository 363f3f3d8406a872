"""`fleetgrade run` from gs:// to gs:// against a real GCS JSON API server on loopback.

The server is gcp-storage-emulator, started on a free port; the storage layer is not mocked.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from tests.conftest import REPO

FLEET = REPO / "examples" / "fleet"
BUCKET = "fleet-bucket"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def gcs_server() -> Iterator[str]:
    port = free_port()
    exe = Path(sys.executable).parent / "gcp-storage-emulator"
    cmd = [str(exe) if exe.exists() else shutil.which("gcp-storage-emulator") or "gcp-storage-emulator",
           "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory", "--default-bucket", BUCKET, "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    host = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("gcp-storage-emulator did not start")
    old = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = host
    try:
        yield host
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if old is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = old


def client():  # type: ignore[no-untyped-def]
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(credentials=AnonymousCredentials(), project="fleetgrade-test")


def test_run_gs_to_gs(gcs_server, tmp_path):
    c = client()
    bucket = c.bucket(BUCKET)
    for path in sorted(FLEET.rglob("*")):
        if path.is_file():
            bucket.blob(f"fleet/{path.relative_to(FLEET).as_posix()}").upload_from_filename(str(path))

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
    for path in sorted(local_fleet.rglob("*")):
        if path.is_file():
            bucket.blob(f"regrade-fleet/{path.relative_to(local_fleet).as_posix()}").upload_from_filename(str(path))
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
