"""Hostile run content (issue 28): walks, reads, identity, deep JSON and grader results."""

from __future__ import annotations

import io
import json
import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.grading.engine import grade_trace
from graders.grading.plan import GradingPlan, PlanEntry
from graders.jsrt.jscompat import js_stringify
from graders.jsrt.jsonio import JsonTooDeep, parse_json
from graders.prepare import UnreadableRunError, prepare_run
from graders.runs import runfiles
from graders.runs.layout import layout_hints
from graders.runs.runfiles import (
    NOT_UTF8,
    SPECIAL,
    SYMLINK,
    UNREADABLE_DIR,
    FileTooLarge,
    NotReadable,
    RunFiles,
    local_run_files,
    open_regular,
    walk_local,
)
from graders.runs.runmeta import MetadataError, check_name, determine_run_meta, read_aw_info
from graders.tables.rows import result_rows
from schemas.documents import RunMeta


def _nest(folder: Path, depth: int) -> str:
    """``depth`` folders, one in the other, made level by level (os.makedirs recurses)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        fd, old = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(old)
    with os.fdopen(os.open("x.json", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as fh:
        fh.write("{}")
    os.close(fd)
    return "d/" * depth + "x.json"


def _unnest(folder: Path, rel: str) -> None:
    """Remove what :func:`_nest` made, deepest first: pytest's own clean-up of old temporary
    folders recurses and would fail on it in a later session."""
    os.unlink(folder / rel)
    parts = rel.split("/")[:-1]
    for depth in range(len(parts), 0, -1):
        os.rmdir(folder / "/".join(parts[:depth]))


def test_the_walk_goes_as_deep_as_the_folders_without_recursion(tmp_path):
    rel = _nest(tmp_path, 1100)
    try:
        assert [(r, s) for r, s, _ in walk_local(str(tmp_path))] == [(rel, 2)]
    finally:
        _unnest(tmp_path, rel)


def test_entries_not_read_are_named_with_why(tmp_path):
    run = tmp_path / "run"
    (run / "mcp-logs").mkdir(parents=True)
    (run / "aw_info.json").write_text("{}")
    os.mkfifo(run / "agent_output.json")
    os.symlink("/dev/zero", run / "mcp-logs" / "gateway.jsonl")
    os.symlink(run / "aw_info.json", run / "inside.json")
    os.mkdir(os.path.join(os.fsencode(run), b"bad-\xff"))
    listed = {rel: size for rel, size, _ in walk_local(str(run))}
    assert listed == {"agent_output.json": SPECIAL, "aw_info.json": 2, "bad-\\xff/.": NOT_UTF8,
                      "inside.json": SYMLINK, "mcp-logs/gateway.jsonl": SYMLINK}
    files = local_run_files(run)
    assert files.sizes == {"aw_info.json": 2}
    assert files.warnings == [
        "agent_output.json: not a regular file (FIFO, socket or device); not read",
        "bad-\\xff/: name is not valid UTF-8; not read",
        "inside.json: symbolic link; not followed",
        "mcp-logs/gateway.jsonl: symbolic link to a place outside the run folder; not followed",
    ]


def test_an_unreadable_folder_is_a_warning_and_an_unreadable_run_a_dead_letter(tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "mcp-logs").mkdir(parents=True)
    (run / "aw_info.json").write_text(json.dumps({"workflow_name": "w", "run_id": 1, "created_at": "2026-05-01"}))
    (run / "mcp-logs" / "gateway.jsonl").write_text("{}\n")
    scandir = os.scandir
    refused: set[str] = {str(run / "mcp-logs")}

    def fake_scandir(path):  # tests run as root, whom permissions do not stop
        if str(path) in refused:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", fake_scandir)
    assert ("mcp-logs/.", UNREADABLE_DIR) in [(r, s) for r, s, _ in walk_local(str(run))]
    prep = prepare_run(local_run_files(run), "w/run-1")
    assert prep.report.warnings == ["mcp-logs/: folder cannot be read; its files are not graded"]
    refused.add(str(run))
    with pytest.raises(UnreadableRunError, match="nothing in the run folder can be read: this folder: folder cannot"):
        prepare_run(local_run_files(run), "w/run-1")


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "folder-by-folder"])
def test_open_regular_follows_no_link_and_opens_no_fifo(tmp_path, monkeypatch, openat2):
    if not openat2:
        monkeypatch.setattr(runfiles, "_openat2", None)
    elif runfiles._openat2 is None:
        pytest.skip("no openat2 here")
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    (run / "sub" / "a.json").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.json").write_text("secret")
    os.symlink(outside / "a.json", run / "link.json")
    os.symlink(outside, run / "linkdir")
    os.mkfifo(run / "fifo")
    with open_regular(str(run), "sub/a.json") as fh:
        assert fh.read() == b"{}"
    os.symlink(run / "sub", run / "inner")  # a link to a folder of the run is not followed either
    for rel in ("link.json", "linkdir/a.json", "fifo", "inner/a.json"):
        with pytest.raises(NotReadable):  # listed as regular once, swapped since
            open_regular(str(run), rel)


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "folder-by-folder"])
def test_a_held_run_folder_is_opened_once_for_its_files_and_closed_after(tmp_path, monkeypatch, openat2):
    if not openat2:
        monkeypatch.setattr(runfiles, "_openat2", None)
    run = tmp_path / "run"
    (run / "a" / "b").mkdir(parents=True)
    (run / "top.json").write_text("1")
    (run / "a" / "b" / "deep.json").write_text("2")
    os.symlink(run / "top.json", run / "link.json")
    files = local_run_files(run)
    fds = len(os.listdir("/proc/self/fd"))
    with files.held():
        assert files.read("a/b/deep.json") == b"2"
        with pytest.raises(NotReadable):
            files.open("link.json")
        os.rename(run, tmp_path / "moved")  # the folder held is the one read, wherever it goes
        assert files.read("top.json") == b"1" and files.read("a/b/deep.json") == b"2"
    assert len(os.listdir("/proc/self/fd")) == fds
    with pytest.raises(FileNotFoundError):  # not held: each file is opened by the folder's path
        files.read("top.json")


def _zeros(_: str) -> io.BufferedReader:
    return open("/dev/zero", "rb")


@pytest.mark.parametrize("read", [lambda f: f.read("x"), lambda f: list(f.iter_line_batches("x")),
                                  lambda f: list(f.iter_lines("x"))])
def test_the_byte_limit_holds_on_bytes_read_not_on_the_listed_size(read):
    files = RunFiles("run", {"x": 0}, _zeros)
    with pytest.raises(FileTooLarge, match="run/x: more than 52428800 bytes read"):
        read(files)


def _meta(tmp_path: Path, info: dict[str, object], root: str = "wf/run-1") -> RunMeta:
    (tmp_path / "aw_info.json").write_text(json.dumps(info))
    return determine_run_meta(local_run_files(tmp_path), root)


@pytest.mark.parametrize("info, words", [
    ({"run_attempt": 2**40}, "run_attempt 1099511627776 is out of range"),
    ({"run_attempt": 1e300}, "run_attempt 1e+300 is out of range"),
    ({"workflow_name": "w" * 300}, "workflow_name is 300 characters long, over the limit of 256"),
    ({"workflow_name": "a\nb"}, "workflow_name holds the control character '\\n'"),
    ({"run_id": "x" * 200}, "run_id is 200 characters long"),
    ({"created_at": "9999-12-31T23:00:00-05:00"}, "created_at is not an ISO 8601 timestamp within years"),
])
def test_identity_is_checked_before_it_is_a_path_or_a_column(tmp_path, info, words):
    with pytest.raises(MetadataError, match=r"aw_info\.json: ") as err:
        _meta(tmp_path, {"workflow_name": "w", "run_id": 1, "created_at": "2026-05-01T00:00:00Z", **info})
    assert words in str(err.value)


def test_the_largest_attempt_and_a_long_cjk_name_are_identities(tmp_path):
    meta = _meta(tmp_path, {"workflow_name": "工" * 256, "run_id": 1, "run_attempt": 2**31 - 1,
                            "created_at": "2026-05-01T00:00:00Z"})
    assert (meta.workflow, meta.attempt) == ("工" * 256, 2**31 - 1)


def test_aw_info_is_read_once_per_run_and_counted_once_per_reader(tmp_path):
    (tmp_path / "aw_info.json").write_text(json.dumps({"workflow_name": "w", "run_id": 1}))
    files = local_run_files(tmp_path)
    opened: list[str] = []
    opener = files._opener
    files._opener = lambda rel: (opened.append(rel), opener(rel))[1]
    first = read_aw_info(files)
    assert read_aw_info(files) == first and read_aw_info(files)[1] is first[1]
    assert opened == ["aw_info.json"]
    assert files.bytes_read == 3 * (tmp_path / "aw_info.json").stat().st_size  # runs.bytes_read as before


@pytest.mark.parametrize("folder", ["0000-00-00", "2026-13-45", "date=2026-02-30"])
def test_a_date_folder_that_is_no_date_is_refused_and_never_a_partition(tmp_path, folder):
    assert layout_hints(f"wf/{folder}/7") == ("wf", "7", None)
    with pytest.raises(MetadataError, match=f"{tmp_path}: the folder '{folder}' in its path is not a real date"):
        _meta(tmp_path, {"run_id": 7}, root=f"wf/{folder}/7")
    assert layout_hints("wf/2024-02-29/7") == ("wf", "7", "2024-02-29")


def test_deep_json_is_read_to_the_parsers_depth_and_refused_past_it_by_name():
    deep = "[" * 1000 + "]" * 1000
    assert js_stringify(parse_json(deep)) == deep
    with pytest.raises(JsonTooDeep, match="nested deeper than 1024 levels"):
        parse_json("[" * 5000 + "]" * 5000)
    # an integer beyond 2**53, or a number beyond the doubles, takes the slow path: read as
    # deep, at any depth of the caller's stack (issue 40: 600 levels and a 19-digit leaf were refused)
    def at_depth(frames: int, text: str) -> object:
        return at_depth(frames - 1, text) if frames else parse_json(text)

    for leaf, value in (("12345678901234567890", "12345678901234567000"), ("1e400", "null"), ("7" * 5000, "null")):
        # written back as JSON.stringify writes the double (Infinity as null): compared without recursion
        assert js_stringify(at_depth(900, "[" * 1024 + leaf + "]" * 1024)) == "[" * 1024 + value + "]" * 1024
        with pytest.raises(JsonTooDeep, match="nested deeper than 1024 levels"):
            at_depth(900, "[" * 1025 + leaf + "]" * 1025)


def _deep(depth: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(depth):
        value = {"d": value}
    return value


@pytest.mark.parametrize("depth", [300, 500])  # past orjson's 254 levels; past copy.deepcopy's stack
def test_a_grader_returning_deep_diagnostics_fails_only_itself(depth):
    def executor(entry, trace, ctx):
        return {"value": 1, "diagnostics": _deep(depth if entry.id == "deep" else 3)}

    entries = tuple(PlanEntry(id=i, name=i, source="inline", script="x") for i in ("deep", "fine"))
    plan = GradingPlan(entries)
    results = {r["id"]: r for r in grade_trace({}, plan, {"inline": executor})}
    assert results["deep"]["status"] == "error"
    assert results["deep"]["error"].startswith("grader deep returned a result that cannot be stored")
    assert results["fine"]["status"] == "pass" and results["fine"]["diagnostics"] == _deep(3)
    meta = RunMeta(workflow="w", run_id="1", attempt=1, date="2026-05-01", root="r",
                   metadata_source="aw_info")
    assert len(result_rows(meta, list(results.values()), plan, "digest")) == 2  # every row encodes


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(["\ud800", "\x7f", "\x85", "\x00", "é", " "])),
               max_size=12))
def test_an_identity_is_refused_exactly_when_it_holds_a_control_character(value):
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is None:
        assert check_name(value, "run_id", 100, "w") == value
    else:
        with pytest.raises(MetadataError, match="holds the control character"):
            check_name(value, "run_id", 100, "w")
