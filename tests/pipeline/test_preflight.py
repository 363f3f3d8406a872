"""The command line's own parsing and checks, in process: Beam flag splitting, placement, GCS probes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import preflight
from pipeline.beam_flags import beam_flags, split_beam_flags
from pipeline.cli import unknown_argument
from pipeline.errors import UsageError, one_line

OURS = {"--input": 1, "--output": 1, "--full": 0, "--runner": 1, "--graders-dir": 1}
BEAM_SAMPLE = ["--project", "--temp_location", "--save_main_session", "--experiments", "--dry_run", "--num_workers"]
VALUE = st.text(st.sampled_from("abc-_./:=0"), min_size=1, max_size=6).filter(lambda v: not v.startswith("--"))


@st.composite
def command_lines(draw: Any) -> tuple[list[str], list[str], list[str]]:
    """A command line of our flags and Beam's, each written as `--f v`, `--f=v` or bare; and the split
    it must come apart into."""
    ours: list[str] = []
    beams: list[str] = []
    line: list[str] = []
    for _ in range(draw(st.integers(0, 8))):
        beam = draw(st.booleans())
        flag = draw(st.sampled_from(BEAM_SAMPLE if beam else sorted(OURS)))
        arity = beam_flags()[flag] if beam else OURS[flag]
        if arity == 0:
            tokens = [flag]
        elif draw(st.booleans()):
            tokens = [f"{flag}={draw(VALUE)}"]
        else:
            tokens = [flag, draw(VALUE)]
        (beams if beam else ours).extend(tokens)
        line.extend(tokens)
    return line, ours, beams


@settings(deadline=None)  # the first example imports Beam's options
@given(command_lines())
def test_split_keeps_each_side_whole_and_in_order(case):
    line, ours, beams = case
    assert split_beam_flags(line, OURS) == (ours, beams)


def test_ours_win_where_beam_defines_the_same_flag():
    assert "--runner" in beam_flags()
    assert split_beam_flags(["--runner", "dataflow", "--project", "p"], OURS) == (["--runner", "dataflow"],
                                                                                ["--project", "p"])


def test_unknown_flags_stay_ours_to_report():
    assert split_beam_flags(["--frobnicate", "x", "--flink_master", "y"], OURS) == (
        ["--frobnicate", "x", "--flink_master", "y"], [])


@pytest.mark.parametrize(("tokens", "message"), [
    (["--graders-dri", "x"], "unknown flag --graders-dri; did you mean --graders-dir?"),
    (["--temp-location=gs://b"], "unknown flag --temp-location; did you mean --temp_location?"),
    (["--zzz"], "unknown flag --zzz"),
    (["stray"], "unexpected argument 'stray'"),
])
def test_unknown_argument_suggests_the_closest_flag(tokens, message):
    assert unknown_argument(tokens, [*OURS, *beam_flags()]).what == message


def test_one_line_folds_every_line_break():
    assert one_line("sql", "Binder Error: x\n\nLINE 1: SELECT", "/out") == "fleetgrade sql: Binder Error: x LINE 1: SELECT (/out)"
    assert one_line(None, "unknown flag --x") == "fleetgrade: unknown flag --x"


@pytest.mark.parametrize(("path", "base", "inside"), [
    ("gs://b/fleet/graded", "gs://b/fleet", True),
    ("gs://b/fleet/", "gs://b/fleet", True),
    ("gs://b/fleet-graded", "gs://b/fleet", False),
    ("gs://c/fleet", "gs://b/fleet", False),
    ("/data/fleet/../graded", "/data/fleet", False),
    ("/data/fleet/./x", "/data/fleet", True),
    ("gs://b/fleet", "/b/fleet", False),
])
def test_inside(path, base, inside):
    assert preflight._inside(path, base) is inside


class _FakeGcs:
    """GcsIO's surface the output probe uses: the bucket, an object write, its delete."""

    def __init__(self, bucket: bool = True, writable: bool = True) -> None:
        self.bucket, self.writable, self.deleted = bucket, writable, []

    def get_bucket(self, name: str) -> object | None:
        return object() if self.bucket else None

    def open(self, path: str, mode: str) -> Any:
        if not self.writable:
            raise PermissionError("403 POST https://storage.googleapis.com/upload: caller does not have "
                                  "storage.objects.create access\nmore detail")
        import io

        return io.BytesIO()

    def delete(self, path: str) -> None:
        self.deleted.append(path)


def test_gcs_output_not_writable_is_one_usage_error(monkeypatch):
    monkeypatch.setattr(preflight, "_gcs_io", lambda options: _FakeGcs(writable=False))
    with pytest.raises(UsageError) as exc:
        preflight.check_output("gs://b/graded")
    assert exc.value.what.startswith("--output is not writable: 403 POST")
    assert "\n" not in exc.value.what and exc.value.where == "gs://b/graded"


def test_gcs_output_probe_is_deleted(monkeypatch):
    fake = _FakeGcs()
    monkeypatch.setattr(preflight, "_gcs_io", lambda options: fake)
    assert preflight.check_output("gs://b/graded/") == "output gs://b/graded/ writable"
    assert len(fake.deleted) == 1 and fake.deleted[0].startswith("gs://b/graded/.fleetgrade-write-test-")


@pytest.fixture(scope="module")
def js() -> Any:
    from graders.families.inline_js.sandbox import JsSandbox

    sandbox = JsSandbox()  # the helper process, as the pipeline's evaluations use
    yield sandbox
    sandbox.close()


@pytest.mark.parametrize(("script", "error"), [
    ("return { value: trace.toolCalls.length }", None),
    ("const a = 1;\nreturn { value: a +; }", "SyntaxError: Unexpected token ';' (line 2)"),
    ("let x;\nlet x = 2;\nreturn x", "SyntaxError: Identifier 'x' has already been declared (line 2)"),
    ("with (trace) { return 1 }", "SyntaxError: Strict mode code may not include a with statement (line 1)"),
    ("return {", "SyntaxError: Unexpected token ')' (at the end)"),
    ("while (true) {}", None),  # compiled, never called: no time limit is reached
])
def test_syntax_error_compiles_and_never_calls(js, script, error):
    assert js.syntax_error(script) == error


def test_a_script_that_closes_its_wrapper_is_not_a_compile_error(js):
    """Code after a premature `})` is the evaluation's business (a runtime error per run), not a syntax one."""
    assert js.syntax_error("}); throw new Error('top level'); (function () {") is None


def test_compile_inline_graders_names_file_grader_and_line(tmp_path):
    from pipeline.plans import load_plans

    cfg = tmp_path / "g.yaml"
    cfg.write_text("graders:\n  ok-metric:\n    script: 'return { value: 1 }'\n"
                   "  bad-metric:\n    script: |\n      const n = 1;\n      return n n;\n")
    with pytest.raises(UsageError) as exc:
        preflight.compile_inline_graders(load_plans(str(cfg), None), str(cfg), None)
    assert exc.value.what == "inline grader 'bad-metric' does not compile: SyntaxError: Unexpected identifier 'n'"
    assert exc.value.where == f"{cfg}: graders.bad-metric.script, line 2"
    cfg.write_text("graders:\n  ok-metric:\n    script: 'return { value: 1 }'\n")
    assert preflight.compile_inline_graders(load_plans(str(cfg), None), str(cfg), None) == 1
