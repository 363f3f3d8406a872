"""Hostile evaluators end as clear errors and leave the host unchanged."""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import tempfile
import time
from pathlib import Path

import orjson
import pytest

from graders.families.opvalue.errors import OperationalValueError, SandboxUnavailableError
from graders.families.opvalue.sandbox import NOBODY, SandboxOptions, run_evaluator, timeout_ms
from tests.graders.opvalue.conftest import evaluator

OK = """echo '[{"id":"ok","value":1}]'"""


def run(body: str, opts: SandboxOptions, request: bytes = b"{}") -> str:
    return run_evaluator(evaluator(body), request, opts)


def error_of(body: str, opts: SandboxOptions, request: bytes = b"{}") -> str:
    with pytest.raises(OperationalValueError) as info:
        run(body, opts, request)
    assert not isinstance(info.value, SandboxUnavailableError), info.value
    return str(info.value)


def _procs(pattern: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if pattern in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _nobody_procs() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            uid = re.search(r"^Uid:\s+(\d+)", status, re.M)
            if uid and int(uid.group(1)) == NOBODY and "State:\tZ" not in status:
                found.append(int(entry.name))
    return found


def _eventually_empty(probe, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    left = probe()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = probe()
    return left


def test_request_on_stdin_and_stdout_returned(sandbox):
    out = run('jq -c \'[{id: "n", value: (.outputs | length)}, {id: "args", value: $ARGS.positional | length}]\' --args "$@"',
              sandbox, b'{"outputs": [1, 2, 3]}')
    assert orjson.loads(out) == [{"id": "n", "value": 3}, {"id": "args", "value": 0}]


def test_nonzero_exit_uses_trimmed_stderr_else_status(sandbox):
    assert error_of("echo '  boom  ' >&2; exit 3", sandbox) == "boom"
    assert error_of("exit 4", sandbox) == "operational-value evaluator exited with status 4"


def test_signal_is_reported_by_name_not_as_exit_status(sandbox):
    assert error_of("kill -TERM $$", sandbox) == "operational-value evaluator was terminated by signal SIGTERM"
    assert error_of("exit 137", sandbox) == "operational-value evaluator exited with status 137"


def test_syntax_error_is_wrapped(sandbox):
    message = error_of("if then fi", sandbox)
    assert message.startswith("operational-value evaluator has invalid Bash syntax: ")
    assert "syntax error" in message


def test_timeout_kills_the_whole_process_group(sandbox):
    opts = dataclasses.replace(sandbox, evaluator_timeout_ms=500)
    marker = "31415"
    started = time.monotonic()
    message = error_of(f"sleep {marker} & sleep {marker}; {OK}", opts)
    assert message == "operational-value evaluator timed out after 500ms"
    assert time.monotonic() - started < 10
    assert _eventually_empty(lambda: _procs(f"sleep\x00{marker}".encode())) == []


def test_stdout_over_one_mebibyte_is_refused(sandbox):
    message = error_of("head -c 2000000 /dev/zero | tr '\\0' x", sandbox)
    assert message == "operational-value evaluator output exceeded the 1048576-byte limit"


def test_stdout_of_exactly_the_limit_is_accepted(sandbox):
    assert len(run("head -c 1048576 /dev/zero | tr '\\0' x", sandbox)) == 1048576


def test_no_network_loopback_server_sees_no_connection(sandbox):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    try:
        body = (
            f"if command -v curl >/dev/null; then curl -s --max-time 3 http://127.0.0.1:{port}/ && {OK} && exit 0; fi\n"
            f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo hello >&3 && {OK}"
        )
        message = error_of(body, sandbox)
        assert re.search(r"Connection refused|Network is unreachable|Cannot assign", message), message
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


def test_host_secrets_are_not_visible(sandbox, monkeypatch):
    monkeypatch.setenv("FLEETGRADE_TEST_SECRET", "s3cr3t-value-42")
    monkeypatch.setenv("GH_TOKEN", "host-token-not-configured")
    body = (
        "if env | grep -q -e s3cr3t-value-42 -e host-token || grep -qs s3cr3t-value-42 /proc/*/environ; "
        f"then {OK}; else echo 'no secret visible' >&2; exit 9; fi"
    )
    assert error_of(body, sandbox) == "no secret visible"


def test_only_whitelisted_configured_env_reaches_the_evaluator(sandbox):
    opts = dataclasses.replace(sandbox, env={"GH_TOKEN": "tok-1", "SECRET_DEPLOY_KEY": "nope", "GH_HOST": ""})
    out = run("env | sort | jq -R -s -c '[{id: \"env\", value: null}] + [split(\"\\n\")[] | select(length > 0) | {id: ., value: 1}]'", opts)
    names = {m["id"].split("=", 1)[0] for m in orjson.loads(out)[1:]}
    assert "GH_TOKEN=tok-1" in {m["id"] for m in orjson.loads(out)}
    assert names <= {"GH_TOKEN", "HOME", "TMPDIR", "PATH", "PWD", "SHLVL", "_"}


def test_writes_outside_the_sandbox_fail_and_the_host_is_unchanged(sandbox, tmp_path):
    target = tmp_path / "host-file.txt"
    target.write_text("original")
    message = error_of(f"set -e; echo pwned > '{target}'; {OK}", sandbox)
    assert "No such file or directory" in message
    message = error_of(f"set -e; echo pwned > /usr/fleetgrade-probe; {OK}", sandbox)
    assert "Read-only file system" in message
    # Recreating the folder only writes into the sandbox's private /tmp.
    run(f"set -e; mkdir -p '{tmp_path}'; echo pwned > '{target}'; echo created > '{tmp_path}/new'; {OK}", sandbox)
    assert target.read_text() == "original"
    assert not (tmp_path / "new").exists()
    assert not Path("/usr/fleetgrade-probe").exists()


def test_host_home_and_work_tree_are_not_mounted(sandbox):
    here = Path(__file__).resolve()
    body = f"if [ -e '{here}' ] || [ -e /root ] || [ -e /home ]; then {OK}; else echo hidden >&2; exit 5; fi"
    assert error_of(body, sandbox) == "hidden"


def test_fork_bomb_is_bounded_and_cleaned_up(sandbox):
    limited = dataclasses.replace(sandbox, max_processes=48)
    assert orjson.loads(run('echo "[{\\"id\\":\\"u\\",\\"value\\":$(ulimit -u)}]"', limited)) == [{"id": "u", "value": 48}]
    opts = dataclasses.replace(limited, evaluator_timeout_ms=2000)
    before = set(_nobody_procs())  # unrelated host processes running as nobody, if any
    message = error_of("bomb() { bomb | bomb & }; bomb 2>/dev/null; wait; sleep 60", opts)
    assert message == "operational-value evaluator timed out after 2000ms"
    assert _eventually_empty(lambda: sorted(set(_nobody_procs()) - before)) == []


def test_unbounded_allocation_hits_the_memory_limit(sandbox):
    opts = dataclasses.replace(sandbox, memory_bytes=128 * 1024 * 1024)
    message = error_of("x=$(head -c 1000000 /dev/zero | tr '\\0' a); while :; do x=$x$x; done", opts)
    assert re.search(r"cannot allocate|terminated by signal", message), message


def test_file_size_limit(sandbox):
    opts = dataclasses.replace(sandbox, max_file_bytes=1024 * 1024)
    message = error_of(f"set -e; head -c 5000000 /dev/zero > /tmp/big; {OK}", opts)
    assert re.search(r"File size limit|exited with status|signal SIGXFSZ", message), message


def test_temp_dir_is_always_removed(sandbox, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run(OK, sandbox)
    error_of("exit 1", sandbox)
    error_of("if then", sandbox)
    assert list(tmp_path.iterdir()) == []


def test_missing_bwrap_fails_closed(tmp_path):
    marker = tmp_path / "ran"
    opts = SandboxOptions(bwrap_path="/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailableError, match=r"^operational-value sandbox unavailable: "):
        run_evaluator(evaluator(f"touch '{marker}'; {OK}"), b"{}", opts)
    assert not marker.exists()


def test_sandbox_that_cannot_be_created_fails_closed(tmp_path):
    marker = tmp_path / "ran"
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        os.chmod(folder, 0o755)  # bwrap runs as nobody when we are root
        fake = Path(folder) / "bwrap"
        fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
        fake.chmod(0o755)
        with pytest.raises(SandboxUnavailableError) as info:
            run_evaluator(evaluator(f"touch '{marker}'; {OK}"), b"{}", SandboxOptions(bwrap_path=str(fake)))
    assert str(info.value) == "operational-value sandbox unavailable: bwrap: No permissions to create new namespace"
    assert not marker.exists()


def test_explicit_unsandboxed_opt_in_still_filters_the_environment(monkeypatch):
    monkeypatch.setenv("FLEETGRADE_TEST_SECRET", "s3cr3t")
    opts = SandboxOptions(bwrap_path="/nonexistent/bwrap", allow_unsandboxed=True)
    out = run_evaluator(evaluator(f'[ -z "$FLEETGRADE_TEST_SECRET" ] && {OK}'), b"{}", opts)
    assert orjson.loads(out) == [{"id": "ok", "value": 1}]


def test_timeout_overrides_are_positive_integers_capped():
    assert timeout_ms(None, 5000) == 5000
    assert timeout_ms("abc", 5000) == 5000
    assert timeout_ms("0", 5000) == 5000
    assert timeout_ms(-3, 5000) == 5000
    assert timeout_ms(" 250 ", 5000) == 250
    assert timeout_ms(2**40, 5000) == 2**31 - 1
    assert SandboxOptions(evaluator_timeout_ms="x").evaluator_timeout == 120_000
    assert SandboxOptions().syntax_timeout == 5_000


def test_sandbox_runs_as_nobody_when_root(sandbox):
    out = run('echo "[{\\"id\\":\\"uid\\",\\"value\\":$(id -u)}]"', sandbox)
    expected = NOBODY if os.geteuid() == 0 else os.geteuid()
    assert orjson.loads(out)[0]["value"] in (expected, NOBODY)


def test_sigpipe_has_its_default_disposition(sandbox):
    out = run('yes | head -n 1 >/dev/null; echo "[{\\"id\\":\\"p\\",\\"value\\":${PIPESTATUS[0]}}]"', sandbox)
    assert orjson.loads(out) == [{"id": "p", "value": 141}]


def test_only_standard_streams_are_inherited(sandbox):
    # ls writes to a file, so the script holds no pipe of its own while its fds are listed.
    body = (
        "ls /proc/$$/fd > /tmp/fds; "
        "jq -R -s -c '[split(\"\\n\")[] | select(length > 0) | {id: ., value: 1}]' /tmp/fds"
    )
    assert {m["id"] for m in orjson.loads(run(body, sandbox))} <= {"0", "1", "2", "255"}  # 255: the script


def test_concurrent_runs_are_independent(sandbox):
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> str:
        return run(f'sleep 0.2; echo "[{{\\"id\\":\\"i\\",\\"value\\":{i}}}]"', sandbox)

    with ThreadPoolExecutor(max_workers=6) as pool:
        outs = list(pool.map(one, range(6)))
    assert [orjson.loads(o)[0]["value"] for o in outs] == list(range(6))
