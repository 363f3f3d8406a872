"""The output lock and per-job staging on a local folder (GCS: tests/pipeline/test_output_lock_gcs.py;
through the executable: tests/pipeline/test_output_lock_cli.py)."""

from __future__ import annotations

import dataclasses
import errno
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.helpers.racing import racing
from transforms.output_lock import (
    LOCK_NAME,
    LOCKED_EXIT,
    STAGING,
    LocalStore,
    LockLost,
    OutputFull,
    OutputLock,
    OutputLocked,
    Owner,
    check_holder,
    gone_reason,
    output_lock,
    process_alive,
    staging_owner,
)

T0 = 1_800_000_000.0


def dead_pid() -> int:
    """The pid of a process that has ended and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def write_lock(out: Path, owner: Owner) -> bytes:
    out.mkdir(parents=True, exist_ok=True)
    data = owner.encode()
    (out / LOCK_NAME).write_bytes(data)
    return data


def owner(job: str, now: float = T0, ttl: float = 600, **fields: Any) -> Owner:
    return dataclasses.replace(Owner.current(job, "run", now, ttl), **fields)


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@given(job=names, command=names, host=names, machine=names, pid=st.integers(1, 2**31),
       pid_start=st.none() | st.integers(0, 2**62), started=st.integers(0, 2**32), ttl=st.integers(1, 10**6))
def test_owner_record_round_trips(job, command, host, machine, pid, pid_start, started, ttl):
    o = Owner(job, command, host, machine, pid, pid_start, float(started), float(started + ttl))
    assert Owner.decode(o.encode()) == o


@given(st.binary(max_size=200))
def test_anything_else_is_not_a_lock_record(data):
    try:
        Owner.decode(data)
    except ValueError:
        return
    assert data.lstrip().startswith(b"{")  # only a JSON object with every field decodes


def test_owner_is_gone_when_expired_or_its_process_is_dead():
    me = owner("a")
    assert gone_reason(me, T0 + 599) is None
    assert "expiry 2027-01-15T08:10:00Z has passed" in (gone_reason(me, T0 + 600) or "")
    dead = dataclasses.replace(me, pid=dead_pid())
    assert f"process {dead.pid} on {me.host} is gone" == gone_reason(dead, T0)
    # The pid check holds only on the same kernel and pid namespace: elsewhere, only the expiry.
    assert gone_reason(dataclasses.replace(dead, machine="other-boot/1"), T0) is None
    assert gone_reason(dataclasses.replace(dead, host="elsewhere"), T0) is None


def test_a_reused_pid_or_a_zombie_is_not_the_owner():
    me = owner("a")
    assert process_alive(me.pid, me.pid_start)
    assert me.pid_start is not None
    assert not process_alive(me.pid, me.pid_start + 1)  # same pid, another process
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped yet
    assert not process_alive(zombie.pid, None)
    zombie.wait()


def test_acquire_release_and_refuse_a_live_holder(tmp_path):
    out = tmp_path / "out"
    a = OutputLock(str(out), "job-a", "run")
    a.acquire()
    record = Owner.decode((out / LOCK_NAME).read_bytes())
    assert (record.job, record.pid, record.command) == ("job-a", os.getpid(), "run")
    b = OutputLock(str(out), "job-b", "regrade")
    with pytest.raises(OutputLocked) as refused:
        b.acquire()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.started))
    assert str(refused.value) == (f"output is locked by run job job-a (pid {os.getpid()} on {record.host}) "
                                  f"since {started} ({out}/{LOCK_NAME})")
    assert refused.value.exit_code == LOCKED_EXIT
    assert Owner.decode((out / LOCK_NAME).read_bytes()) == record, "a refused job changes nothing"
    a.release()
    assert not (out / LOCK_NAME).exists()
    b.acquire()
    assert Owner.decode((out / LOCK_NAME).read_bytes()).job == "job-b"


@pytest.mark.parametrize("stale", ["dead pid", "expired", "unreadable"])
def test_a_stale_lock_is_taken_over(tmp_path, stale, caplog):
    out = tmp_path / "out"
    if stale == "dead pid":
        write_lock(out, owner("old", pid=dead_pid()))
    elif stale == "expired":  # a live process, but its heartbeat stopped renewing long ago
        write_lock(out, owner("old", now=T0 - 10_000))
    else:
        out.mkdir()
        (out / LOCK_NAME).write_bytes(b"{\"job\": ")
    new = OutputLock(str(out), "new", "run", clock=lambda: T0)
    new.acquire()
    assert Owner.decode((out / LOCK_NAME).read_bytes()).job == "new"
    assert "took over the lock" in caplog.text


def test_renew_pushes_the_expiry_and_notices_a_takeover(tmp_path):
    now = [T0]
    out = tmp_path / "out"
    a = OutputLock(str(out), "a", "run", ttl=100, clock=lambda: now[0])
    a.acquire()
    a.claim_staging()
    now[0] += 60
    assert a.renew()
    assert Owner.decode((out / LOCK_NAME).read_bytes()).expires == T0 + 160
    assert Owner.decode((out / staging_owner("a")).read_bytes()).expires == T0 + 160
    now[0] += 200  # a's heartbeat stalled past its expiry: b takes over
    b = OutputLock(str(out), "b", "run", ttl=100, clock=lambda: now[0])
    b.acquire()
    assert not a.renew()
    assert a.lost
    a.release()  # does not remove b's lock
    assert Owner.decode((out / LOCK_NAME).read_bytes()).job == "b"


def test_check_holder_fences_the_commit(tmp_path):
    out = tmp_path / "out"
    check_holder(str(out), "free")  # no lock, no record: a pipeline built without the command line
    a = OutputLock(str(out), "a", "run")
    a.acquire()
    a.claim_staging()
    check_holder(str(out), "a")
    with pytest.raises(LockLost, match="output is locked by run job a"):
        check_holder(str(out), "unmanaged")
    a.release()
    with pytest.raises(LockLost, match="this job's lock on the output was removed before its commit"):
        check_holder(str(out), "a")
    write_lock(out, owner("b"))
    with pytest.raises(LockLost, match="was taken over by run job b"):
        check_holder(str(out), "a")


def test_staging_of_dead_jobs_is_removed_and_of_live_jobs_kept(tmp_path):
    out = tmp_path / "out"
    store = LocalStore(str(out))
    records = {"dead": owner("dead", pid=dead_pid()), "expired": owner("expired", now=T0 - 10_000),
               "live": owner("live", machine="another-machine/1")}  # another host: live until its expiry
    for job, record in records.items():
        store.put(staging_owner(job), record.encode())
        store.put(f"{STAGING}/{job}/_shards/runs-00", b"rows")
    (out / STAGING / "no-record" / "runs").mkdir(parents=True)  # from a build before owner records
    (out / STAGING / "stray-file").write_bytes(b"")
    me = OutputLock(str(out), "me", "run", clock=lambda: T0)
    me.acquire()
    me.claim_staging()
    assert sorted(me.clean_staging()) == ["dead", "expired", "no-record", "stray-file"]
    assert sorted(os.listdir(out / STAGING)) == ["live", "me"]
    assert (out / STAGING / "live" / "_shards" / "runs-00").read_bytes() == b"rows"
    me.drop_staging()
    assert os.listdir(out / STAGING) == ["live"]


def test_output_lock_cleans_up_however_the_body_ends(tmp_path):
    out = tmp_path / "out"
    with output_lock(str(out), "ok", "run"):
        assert (out / staging_owner("ok")).exists()
        (out / STAGING / "ok" / "_shards").mkdir()
    assert sorted(os.listdir(out)) == []

    with pytest.raises(OutputFull, match=r"no space left on device while writing the output; .*\(" + str(out)):
        with output_lock(str(out), "full", "run"):
            (out / STAGING / "full" / "_shards").mkdir()
            try:  # as Beam reports a step's error: wrapped, the OSError as its cause
                raise OSError(errno.ENOSPC, "No space left on device")
            except OSError as exc:
                raise RuntimeError("OSError: [Errno 28] [while running 'Write/Stage[runs]']") from exc
    assert sorted(os.listdir(out)) == []

    with pytest.raises(ValueError, match="a bug"), output_lock(str(out), "bug", "run"):
        raise ValueError("a bug")
    assert sorted(os.listdir(out)) == []

    with pytest.raises(LockLost, match=r"^this job's lock") as lost, output_lock(str(out), "lost", "run"):
        raise RuntimeError("wrapped") from LockLost("this job's lock on the output was removed [while running 'x']")
    assert str(lost.value) == "this job's lock on the output was removed"


RACER = """
import os, sys, time
from transforms.output_lock import OutputLock, OutputLocked
out, job, go = sys.argv[1:]
lock = OutputLock(out, job, "run")
open(go + "." + job, "w").close()  # ready
while not os.path.exists(go):
    time.sleep(0.001)
try:
    lock.acquire()
    print("won", flush=True)
    while not os.path.exists(go + ".done"):  # a winner that exited would be a dead owner, fairly taken over
        time.sleep(0.001)
except OutputLocked:
    print("refused", flush=True)
"""


def test_racing_jobs_on_a_stale_lock_leave_exactly_one_holder(tmp_path):
    """Several processes find the same dead job's lock at once: one takes it over, the rest are refused."""
    out, go = tmp_path / "out", tmp_path / "go"
    write_lock(out, owner("dead", pid=dead_pid()))
    jobs = [f"job-{i}" for i in range(6)]
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(out), job, str(go)], stdout=subprocess.PIPE,
                              text=True) for job in jobs]
    while not all(Path(f"{go}.{job}").exists() for job in jobs):
        assert all(p.poll() is None for p in procs)
        time.sleep(0.01)
    go.touch()
    said = {job: p.stdout.readline().strip() for job, p in zip(jobs, procs, strict=True)}  # type: ignore[union-attr]
    Path(f"{go}.done").touch()
    for p in procs:
        p.communicate(timeout=60)
    winners = [job for job, word in said.items() if word == "won"]
    assert len(winners) == 1 and sorted(said.values()) == ["refused"] * 5 + ["won"]
    assert Owner.decode((out / LOCK_NAME).read_bytes()).job == winners[0]


def test_a_takeover_that_loses_the_compare_and_swap_is_refused(tmp_path):
    out = tmp_path / "out"
    write_lock(out, owner("dead", pid=dead_pid()))
    b = OutputLock(str(out), "b", "run")
    a = OutputLock(str(out), "a", "run", store=racing(LocalStore(str(out)), b.acquire))
    with pytest.raises(OutputLocked, match="locked by run job b"):
        a.acquire()
    assert Owner.decode((out / LOCK_NAME).read_bytes()).job == "b"


class LockStates(RuleBasedStateMachine):
    """Jobs of a few processes acquire, renew, release, die and wait; the lock file always names
    the one job the model says holds it, and an acquire succeeds exactly when the lock is free
    or its holder is gone (dead or expired)."""

    TTL = 100.0

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lockstates-")
        self.out = os.path.join(self.dir, "out")
        self.now = T0
        self.dead: set[int] = set()
        self.next_pid = 10_000
        self.jobs = 0
        self.procs: dict[int, OutputLock | None] = {}  # slot → its process's lock, while it believes it holds
        self.pids: dict[int, int] = {}
        self.holder: tuple[str, int, float] | None = None  # (job, pid, expires) per the model

    def teardown(self) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def _pid(self, slot: int) -> int:
        if slot not in self.pids:
            self.pids[slot] = self.next_pid
            self.next_pid += 1
        return self.pids[slot]

    def _lock(self, slot: int) -> OutputLock:
        self.jobs += 1
        lock = OutputLock(self.out, f"job-{self.jobs}", "run", ttl=self.TTL, clock=lambda: self.now,
                          alive=lambda pid, start: pid not in self.dead)
        lock.owner = dataclasses.replace(lock.owner, pid=self._pid(slot))
        return lock

    def _free(self) -> bool:
        return self.holder is None or self.holder[1] in self.dead or self.now >= self.holder[2]

    @rule(slot=st.integers(0, 2))
    def acquire(self, slot: int) -> None:
        if self.procs.get(slot) is not None:
            return
        lock = self._lock(slot)
        free = self._free()
        try:
            lock.acquire()
        except OutputLocked:
            assert not free
            return
        assert free
        self.procs[slot] = lock
        self.holder = (lock.job, lock.owner.pid, lock.owner.expires)

    @rule(slot=st.integers(0, 2))
    def renew(self, slot: int) -> None:
        lock = self.procs.get(slot)
        if lock is None:
            return
        ours = self.holder is not None and self.holder[0] == lock.job
        assert lock.renew() == ours
        if ours:
            self.holder = (lock.job, lock.owner.pid, self.now + self.TTL)
        else:
            self.procs[slot] = None

    @rule(slot=st.integers(0, 2))
    def release(self, slot: int) -> None:
        lock = self.procs.pop(slot, None)
        if lock is None:
            return
        lock.release()
        if self.holder is not None and self.holder[0] == lock.job:
            self.holder = None

    @rule(slot=st.integers(0, 2))
    def die(self, slot: int) -> None:
        self.dead.add(self._pid(slot))
        self.pids.pop(slot)
        self.procs.pop(slot, None)

    @rule(seconds=st.sampled_from([1.0, 50.0, 99.0, 100.0, 150.0]))
    def wait(self, seconds: float) -> None:
        self.now += seconds

    @invariant()
    def lock_file_names_the_holder(self) -> None:
        path = os.path.join(self.out, LOCK_NAME)
        if self.holder is None:
            assert not os.path.exists(path)
        else:
            with open(path, "rb") as fh:
                record = Owner.decode(fh.read())
            assert (record.job, record.pid, record.expires) == self.holder

    @invariant()
    def at_most_one_live_believer(self) -> None:
        believers = [lk for lk in self.procs.values() if lk is not None and not lk.lost]
        live = [lk for lk in believers if self.holder is not None and lk.job == self.holder[0]]
        assert len(live) <= 1


TestLockStates = LockStates.TestCase
TestLockStates.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)


def test_the_heartbeat_renews_while_the_job_runs(tmp_path):
    from transforms.output_lock import _Heartbeat

    out = tmp_path / "out"
    lock = OutputLock(str(out), "a", "run", ttl=600)
    lock.acquire()
    lock.claim_staging()
    first = Owner.decode((out / LOCK_NAME).read_bytes()).expires
    clock = [lock.owner.started]
    lock.clock = lambda: clock[0] + 30
    beat = _Heartbeat(lock)
    beat.interval = 0.01  # not the minute it waits in a job
    with beat:
        deadline = time.monotonic() + 60
        while Owner.decode((out / LOCK_NAME).read_bytes()).expires == first:
            assert time.monotonic() < deadline, "no renewal"
            time.sleep(0.01)
    assert Owner.decode((out / LOCK_NAME).read_bytes()).expires == first + 30
    assert not beat.thread.is_alive()
    lock.release()
