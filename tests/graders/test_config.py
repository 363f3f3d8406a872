"""The graders configuration: gh-aw's validation messages (docs/reference/graders.md §2) and the manifest (§3)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.grading import registry
from graders.grading.config import (
    GradersConfigError,
    load_graders,
    load_graders_dir,
    parse_graders,
    valid_run_path,
)
from graders.grading.plan import GradingPlan, default_plan
from schemas.documents import Manifest

BUILTIN_IDS = registry.grader_ids("builtin")
BUILTINS_LIST = ", ".join(BUILTIN_IDS)
OV = "operational-value"
OV_RUN = {"run": ".github/workflows/graders/ov.sh"}


def _not_builtin(gid: str) -> str:
    return f"graders.{gid} is not a built-in grader and requires a 'script' field. Built-in graders: {BUILTINS_LIST}"


FORBIDDEN = ["require(", "import(", "import ", "fetch(", "eval(", "process.exit", "child_process", "execSync",
             "spawnSync", "Function("]

ERROR_CASES: list[tuple[str, object, str]] = [
    ("not-a-map-string", "invalid",
     "graders must be a map of grader IDs to configuration objects (or {} for all built-in defaults). "
     "Example:\ngraders:\n  tool-success-rate:\n    enabled: true"),
    ("not-a-map-list", [1],
     "graders must be a map of grader IDs to configuration objects (or {} for all built-in defaults). "
     "Example:\ngraders:\n  tool-success-rate:\n    enabled: true"),
    ("duplicate-after-trim", {" my-x": {"script": "return 1"}, "my-x": {"script": "return 2"}},
     'graders has duplicate id "my-x" after normalization. Remove whitespace variants (for example " my-x" '
     'and "my-x")'),
    ("invalid-id-upper", {"Bad": None},
     'graders has invalid id "Bad": must match ^[a-z][a-z0-9-]{0,63}$. Example:\ngraders:\n  my-metric:\n'
     '    script: "return { value: trace.toolCalls.length }"'),
    ("invalid-id-too-long", {"a" * 65: {"script": "return 1"}},
     f'graders has invalid id "{"a" * 65}": must match ^[a-z][a-z0-9-]{{0,63}}$. Example:\ngraders:\n'
     '  my-metric:\n    script: "return { value: trace.toolCalls.length }"'),
    ("invalid-id-go-quoted", {"a\tb": None},
     'graders has invalid id "a\\tb": must match ^[a-z][a-z0-9-]{0,63}$. Example:\ngraders:\n  my-metric:\n'
     '    script: "return { value: trace.toolCalls.length }"'),
    ("ov-null", {OV: None}, "graders.operational-value requires exactly one of 'run' or 'script'"),
    ("custom-null", {"my-x": None}, _not_builtin("my-x")),
    ("custom-without-script", {"my-x": {"unit": "count"}}, _not_builtin("my-x")),
    ("ov-empty", {OV: {}}, "graders.operational-value requires exactly one of 'run' or 'script'"),
    ("entry-number", {"loops": 5},
     "graders.loops must be a map or null, got uint64. Example:\ngraders:\n  loops:\n    enabled: true"),
    ("entry-string", {"loops": "on"},
     "graders.loops must be a map or null, got string. Example:\ngraders:\n  loops:\n    enabled: true"),
    ("enabled-type", {"loops": {"enabled": "yes"}}, "graders.loops.enabled must be a boolean, got string"),
    ("enabled-null", {"loops": {"enabled": None}}, "graders.loops.enabled must be a boolean, got <nil>"),
    ("name-type", {"loops": {"name": 5}}, "graders.loops.name must be a string, got uint64"),
    ("description-type", {"loops": {"description": []}},
     "graders.loops.description must be a string, got []interface {}"),
    ("unit-type", {"loops": {"unit": {}}}, "graders.loops.unit must be a string, got map[string]interface {}"),
    ("direction-type", {"loops": {"direction": -1}}, "graders.loops.direction must be a string, got int64"),
    ("direction-value", {"loops": {"direction": "up"}},
     "graders.loops.direction must be 'higher_is_better' or 'lower_is_better', got \"up\""),
    ("threshold-type", {"loops": {"threshold": "5"}}, "graders.loops.threshold must be a number, got string"),
    ("max-null", {"loops": {"max": None}}, "graders.loops.max must be a number, got <nil>"),
    ("min-bool", {"loops": {"min": True}}, "graders.loops.min must be a number, got bool"),
    ("config-type", {"loops": {"config": [1]}}, "graders.loops.config must be an object, got []interface {}"),
    ("run-type", {"my-x": {"script": "return 1", "run": 5}}, "graders.my-x.run must be a string, got uint64"),
    ("run-not-ov", {"my-x": {"script": "return 1", "run": "a.sh"}},
     "graders.my-x.run is only supported by the operational-value grader"),
    ("run-traversal", {OV: {"run": ".github/../x.sh"}},
     'graders.operational-value.run must be a workspace-relative or ./ local .sh file, got ".github/../x.sh"'),
    ("run-blank", {OV: {"run": "   "}},
     'graders.operational-value.run must be a workspace-relative or ./ local .sh file, got ""'),
    ("script-type", {"my-x": {"script": 5}}, "graders.my-x.script must be a string, got uint64"),
    ("script-blank", {"my-x": {"script": " \n "}}, "graders.my-x.script must be non-empty when specified"),
    ("builtin-script", {"retries": {"script": "1 + 1"}},
     "graders.retries is a built-in grader and cannot have a custom script"),
    ("ov-run-and-script", {OV: {"run": "ov.sh", "script": "#!/usr/bin/env bash\n"}},
     "graders.operational-value must specify exactly one of 'run' or 'script'"),
    ("ov-script-too-big", {OV: {"script": "#!/usr/bin/env bash\n" + "#" * 65536}},
     "graders.operational-value.script exceeds maximum length of 65536 bytes (65556)"),
    ("script-too-long", {"my-x": {"script": "x" * 4097}},
     "graders.my-x.script exceeds maximum length of 4096 characters (4097)"),
    ("ov-min-inf", {OV: {**OV_RUN, "min": float("-inf")}}, "graders.operational-value.min must be finite"),
    ("ov-max-nan", {OV: {**OV_RUN, "max": float("nan")}}, "graders.operational-value.max must be finite"),
    ("ov-threshold-inf", {OV: {**OV_RUN, "threshold": float("inf")}},
     "graders.operational-value.threshold must be finite"),
    ("ov-min-over-max", {OV: {**OV_RUN, "min": 2.0, "max": 1.0}}, "graders.operational-value.min must not exceed max"),
    ("ov-threshold-below-min", {OV: {**OV_RUN, "min": -1.0, "threshold": -2.0}},
     "graders.operational-value.threshold must not be less than min"),
    ("ov-threshold-above-max", {OV: {**OV_RUN, "max": 5.0, "threshold": 6.0}},
     "graders.operational-value.threshold must not exceed max"),
    ("no-enabled", {"my-x": {"enabled": False}},
     "graders configuration has no enabled graders. Remove the graders field to disable grading, or set "
     "enabled: true on at least one grader"),
] + [
    (f"forbidden-{p.strip()}", {"my-x": {"script": f"return {p}1)"}},
     f'graders.my-x.script contains forbidden pattern "{p}" — inline grader scripts must be pure functions '
     "without side effects")
    for p in FORBIDDEN
]


@pytest.mark.parametrize(("raw", "message"), [(r, m) for _, r, m in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_configuration_errors_have_gh_aw_messages(raw: object, message: str) -> None:
    with pytest.raises(GradersConfigError) as info:
        parse_graders(raw)
    assert str(info.value) == message


def _ids(plan: GradingPlan | None) -> list[str]:
    assert plan is not None
    return [e.id for e in plan.entries]


def test_absent_or_null_graders_is_off() -> None:
    assert parse_graders(None) is None


def test_empty_map_enables_all_ten_builtins() -> None:
    plan = parse_graders({})
    assert _ids(plan) == list(BUILTIN_IDS)
    assert plan is not None and all(e.enabled and e.source == "builtin" for e in plan.entries)


def test_only_custom_graders_get_no_builtins() -> None:
    assert _ids(parse_graders({"zeta": {"script": "return 1"}, "alpha": {"script": "return 2"}})) == [
        "alpha", "zeta"]


def test_one_builtin_adds_the_missing_ones_and_order_is_gh_aw() -> None:
    plan = parse_graders({"zeta": {"script": "return 1"}, "alpha": {"script": "return 2", "enabled": False},
                          "loops": {"enabled": False}, "retries": {"threshold": 2}})
    expected = [b for b in BUILTIN_IDS if b != "loops"] + ["zeta", "alpha", "loops"]
    assert _ids(plan) == expected
    assert plan is not None
    assert [e.enabled for e in plan.entries][-2:] == [False, False]
    retries = next(e for e in plan.entries if e.id == "retries")
    assert retries.threshold == 2 and retries.name == "Retries" and retries.unit == "count"


def test_custom_manifest_entry_keys_and_digest() -> None:
    script = "\n  return { value: trace.toolCalls.length }\n"
    plan = parse_graders({"my-metric": {"script": script, "unit": "count", "direction": "lower_is_better",
                                        "threshold": 5.0, "config": {"k": 1}}})
    assert plan is not None
    (entry,) = plan.entries
    trimmed = script.strip()
    assert entry.script == trimmed
    manifest = entry.manifest_entry()
    assert list(manifest) == ["id", "name", "source", "enabled", "unit", "direction", "threshold", "digest",
                              "config"]
    assert manifest["name"] == "my-metric" and manifest["source"] == "inline"
    assert manifest["threshold"] == 5 and json.dumps(manifest["threshold"]) == "5"  # Go writes 5, not 5.0
    assert manifest["digest"] == hashlib.sha256(trimmed.encode()).hexdigest()


def test_builtin_manifest_entry_matches_registry_and_omits_empty_config() -> None:
    plan = parse_graders({"tool-success-rate": {"config": {}}})
    assert plan is not None
    assert plan.entries[0].manifest_entry() == {
        "id": "tool-success-rate", "name": "Tool Success Rate", "description": "Fraction of tool calls that succeeded",
        "source": "builtin", "enabled": True, "unit": "ratio", "direction": "higher_is_better", "threshold": 0.8,
        "max": 1, "min": 0}


def test_script_limit_counts_code_points_after_trimming() -> None:
    exact = "return '" + "a" * (4096 - len("return ''")) + "'"
    assert parse_graders({"exact": {"script": f"  {exact}\n\n"}}) is not None
    assert parse_graders({"multibyte": {"script": "return '" + "é" * 1366 + "'.length"}}) is not None


def test_disabled_custom_and_ov_may_omit_code() -> None:
    plan = parse_graders({"my-x": {"enabled": False}, OV: {"enabled": False}, "loops": None})
    assert plan is not None
    disabled = {e.id: e for e in plan.entries if not e.enabled}
    assert set(disabled) == {"my-x", OV}
    assert disabled["my-x"].source == "inline" and disabled["my-x"].digest == ""
    assert disabled[OV].source == "operational-value" and disabled[OV].name == "Operational Value"


def test_ov_defaults_and_inline_script_digest_is_raw(tmp_path: Path) -> None:
    script = "#!/usr/bin/env bash\necho '[{\"id\":\"v\",\"value\":1}]'\n"
    wf = tmp_path / "wf.md"
    wf.write_text(f"---\ngraders:\n  operational-value:\n    script: {json.dumps(script)}\n---\n# wf\n")
    plan = load_graders(wf)
    (entry,) = plan.entries
    assert entry.source == "operational-value" and entry.direction == "higher_is_better"
    assert entry.script == script and entry.evaluator == script.encode()
    assert entry.digest == hashlib.sha256(script.encode()).hexdigest()
    assert entry.manifest_entry()["inline"] == "wf.md"


def test_ov_run_digest_is_the_file_bytes(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "wf").mkdir()
    evaluator = b"#!/bin/bash\necho '[]'\n"
    (tmp_path / "wf" / "ov.sh").write_bytes(evaluator)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "ov.sh").write_bytes(evaluator + b"#root\n")
    for run, data in (("./ov.sh", evaluator), ("scripts/ov.sh", evaluator + b"#root\n")):
        (tmp_path / "wf" / "w.yaml").write_text(f"graders:\n  operational-value:\n    run: {run}\n    min: -1\n")
        (entry,) = load_graders(tmp_path / "wf" / "w.yaml").entries
        assert entry.run == run and entry.min == -1
        assert entry.digest == hashlib.sha256(data).hexdigest() and entry.evaluator == data
        assert list(entry.manifest_entry()) == ["id", "name", "source", "enabled", "direction", "min", "digest", "run"]


@pytest.mark.parametrize(("setup", "message"), [
    ("missing", 'cannot inspect graders.operational-value.run "./ov.sh": lstat {path}: no such file or directory'),
    ("symlink", 'graders.operational-value.run "./ov.sh" must not be a symbolic link'),
    ("directory", 'graders.operational-value.run "./ov.sh" must be a regular file'),
    ("too-big", 'graders.operational-value.run "./ov.sh" exceeds the 65536-byte limit'),
    ("not-utf8", 'graders.operational-value.run "./ov.sh" must be valid UTF-8'),
    ("no-shebang", 'graders.operational-value.run "./ov.sh" must start with a Bash shebang'),
])
def test_ov_run_file_checks(tmp_path: Path, setup: str, message: str) -> None:
    ov = tmp_path / "ov.sh"
    if setup == "symlink":
        (tmp_path / "real.sh").write_text("#!/bin/bash\n")
        ov.symlink_to(tmp_path / "real.sh")
    elif setup == "directory":
        ov.mkdir()
    elif setup == "too-big":
        ov.write_text("#!/bin/bash\n" + "#" * 65536)
    elif setup == "not-utf8":
        ov.write_bytes(b"#!/bin/bash\n\xff\n")
    elif setup == "no-shebang":
        ov.write_text("echo '[]'\n")
    wf = tmp_path / "w.yaml"
    wf.write_text("graders:\n  operational-value:\n    run: ./ov.sh\n")
    with pytest.raises(GradersConfigError) as info:
        load_graders(wf)
    assert str(info.value) == message.format(path=ov.absolute())


def test_ov_inline_script_needs_a_shebang() -> None:
    with pytest.raises(GradersConfigError) as info:
        parse_graders({OV: {"script": "echo '[]'\n"}})
    assert str(info.value) == "graders.operational-value.script must start with a Bash shebang"


@pytest.mark.parametrize("path", ["evaluator.sh", ".github/workflows/graders/test.sh", "./graders/test.sh",
                                  "./evaluator.sh", "scripts/nested/evaluator.sh", ".github/..secret.sh"])
def test_valid_run_paths(path: str) -> None:
    assert valid_run_path(path)


@pytest.mark.parametrize("path", ["", "/abs/path.sh", "//evil.com/test.sh", "\\win\\path.sh", "a\\b.sh", ".", "..",
                                  "./", "../test.sh", "./../test.sh", ".github/workflows/../secret.sh",
                                  ".github/workflows//double.sh", "evaluator.js", "evaluator.sh/", "./.", "./..",
                                  "./evaluator.js", ".//x.sh"])
def test_invalid_run_paths(path: str) -> None:
    assert not valid_run_path(path)


@pytest.fixture
def trajectory_spec() -> str:
    """A registered grader that is not one of gh-aw's ten built-ins."""
    gid = "skill-constraint-coverage"
    spec = registry.get(gid)
    assert spec is not None and spec.family == "trajectory"
    return gid


def test_trajectory_ids_are_accepted_as_registry_graders(trajectory_spec: str) -> None:
    cfg = {"constraints": [{"pattern": "^bash "}]}
    plan = parse_graders({trajectory_spec: {"config": cfg}, "my-x": {"script": "return 1"}})
    assert _ids(plan) == [trajectory_spec, "my-x"]  # listing it adds none of gh-aw's ten built-ins
    assert plan is not None
    entry = plan.entries[0]
    assert entry.source == "builtin" and entry.config == cfg and entry.unit == "ratio"
    assert _ids(parse_graders({trajectory_spec: None, "loops": None}))[-1] == trajectory_spec
    with pytest.raises(GradersConfigError, match="is a built-in grader and cannot have a custom script"):
        parse_graders({trajectory_spec: {"script": "return 1"}})


def test_no_configuration_means_the_default_plan(tmp_path: Path) -> None:
    wf = tmp_path / "wf.md"
    wf.write_text("---\non: push\n---\n# no graders\n")
    assert load_graders(wf) == default_plan()


def test_frontmatter_imports_deep_merge(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "base.md").write_text(
        "---\nimports:\n  - more.md\ngraders:\n  shared-score:\n    script: return 1\n    unit: count\n"
        "    direction: lower_is_better\n    config: {a: 1, b: {c: 2}}\n---\nbody\n")
    (tmp_path / "shared" / "more.md").write_text(
        "---\ngraders:\n  nested-score:\n    script: return 4\n  shared-score:\n    unit: steps\n---\n")
    wf = tmp_path / "wf.md"
    wf.write_text("---\non:\n  push: {}\nimports:\n  - shared/base.md\ngraders:\n  local-score:\n"
                  "    script: return 2\n  shared-score:\n    script: return 3\n    config: {b: {d: 4}}\n---\n# wf\n")
    plan = load_graders(wf)
    assert _ids(plan) == ["local-score", "nested-score", "shared-score"]
    shared = plan.entries[2]
    assert shared.script == "return 3"  # the workflow's own map wins
    assert shared.unit == "steps"  # imports merge in order (base, then its import)
    assert shared.direction == "lower_is_better"
    assert shared.config == {"a": 1, "b": {"c": 2, "d": 4}}  # maps merge recursively


def test_imported_empty_map_alone_does_not_configure(tmp_path: Path) -> None:
    (tmp_path / "s.md").write_text("---\ngraders: {}\n---\n")
    wf = tmp_path / "wf.md"
    wf.write_text("---\nimports: [s.md]\n---\n")
    assert load_graders(wf) == default_plan()


def test_yaml_is_read_with_the_core_schema(tmp_path: Path) -> None:
    f = tmp_path / "w.yml"
    f.write_text("loops:\n  enabled: yes\n")
    with pytest.raises(GradersConfigError, match=r"^graders.loops.enabled must be a boolean, got string$"):
        load_graders(f)
    f.write_text("loops: {}\nloops: {enabled: false}\n")
    with pytest.raises(GradersConfigError, match="already defined"):
        load_graders(f)
    f.write_text("my-x:\n  script: return 1\n  config: {when: 2024-01-02, on: yes}\n")
    (entry,) = load_graders(f).entries
    assert entry.config == {"when": "2024-01-02", "on": "yes"}


def test_errors_carry_the_file(tmp_path: Path) -> None:
    f = tmp_path / "w.json"
    f.write_text(json.dumps({"graders": {"my-x": None}}))
    with pytest.raises(GradersConfigError) as info:
        load_graders(f)
    assert str(info.value) == _not_builtin("my-x")
    assert info.value.path == str(f) and info.value.describe().startswith(str(f) + ": ")


def test_load_graders_dir(tmp_path: Path) -> None:
    (tmp_path / "alpha.yaml").write_text("graders:\n  loops:\n    threshold: 1\n")
    (tmp_path / "beta.json").write_text(json.dumps({"my-x": {"script": "return 1"}}))
    (tmp_path / "gamma.md").write_text("---\non: push\n---\n")
    (tmp_path / "notes.txt").write_text("ignored")
    plans = load_graders_dir(tmp_path)
    assert sorted(plans) == ["alpha", "beta", "gamma"]
    assert len(plans["alpha"].entries) == 10 and _ids(plans["beta"]) == ["my-x"]
    assert plans["gamma"] == default_plan()
    (tmp_path / "beta.yml").write_text("{}")
    with pytest.raises(GradersConfigError, match="two graders configurations for workflow 'beta'"):
        load_graders_dir(tmp_path)


def test_plain_files_hold_the_map_itself(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text("{}\n")
    assert _ids(load_graders(f)) == list(BUILTIN_IDS)
    f.write_text("- loops\n")
    with pytest.raises(GradersConfigError, match=r"^graders must be a map of grader IDs"):
        load_graders(f)
    for empty in ("", "\n  \n", "# graders come later\n\n# nothing yet\n"):
        f.write_text(empty)  # a file given as configuration that configures nothing is no default
        with pytest.raises(GradersConfigError, match=r"^the graders configuration is empty") as caught:
            load_graders(f)
        assert caught.value.path == str(f)


def test_manifest_round_trips_through_the_schema(tmp_path: Path) -> None:
    plan = parse_graders({"loops": {"enabled": False, "config": {"k": 1}}, "my-x": {"script": "return 1"},
                          OV: {"script": "#!/bin/bash\necho '[]'\n", "min": 0, "max": 1}})
    assert plan is not None
    manifest = plan.manifest()
    model = Manifest.model_validate_json(json.dumps(manifest))
    assert [e.manifest_entry() for e in model.graders] == manifest["graders"]
    assert [e.id for e in model.graders][-3:] == ["my-x", OV, "loops"]


def test_import_forms_and_missing_imports(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\ngraders:\n  from-a:\n    script: return 1\n---\n## Part\n")
    (tmp_path / "b.yaml").write_text("graders:\n  from-b:\n    script: return 2\n")
    wf = tmp_path / "wf.md"
    wf.write_text("---\nimports:\n  - a.md#Part\n  - path: b.yaml\n  - a.md\n---\n")
    assert _ids(load_graders(wf)) == ["from-a", "from-b"]
    wf.write_text("---\nimports: [missing.md]\n---\n")
    with pytest.raises(GradersConfigError, match="imported file not found"):
        load_graders(wf)


@settings(max_examples=60, deadline=None)
@given(st.permutations(["loops", "retries", "zeta-score", "alpha-score", "mid-score", OV]),
       st.sets(st.sampled_from(["loops", "zeta-score", "mid-score"])))
def test_manifest_does_not_depend_on_key_order(order: list[str], disabled: set[str]) -> None:
    entries = {
        "loops": {"threshold": 1}, "retries": None, "zeta-score": {"script": "return 1"},
        "alpha-score": {"script": "return 2", "unit": "count"}, "mid-score": {"script": "return 3"},
        OV: {"script": "#!/bin/bash\necho '[]'\n", "min": 0, "max": 1, "threshold": 0.5},
    }
    raw = {gid: ({**(entries[gid] or {}), "enabled": False} if gid in disabled else entries[gid]) for gid in order}
    plan = parse_graders(raw)
    canonical = parse_graders({gid: raw[gid] for gid in sorted(raw)})
    assert plan is not None and canonical is not None
    assert plan.manifest() == canonical.manifest() and plan.digest() == canonical.digest()
    flags = [e.enabled for e in plan.entries]
    assert flags == sorted(flags, reverse=True)  # enabled first, then disabled
    assert [e.id for e in plan.entries if not e.enabled] == sorted(disabled)


@pytest.mark.parametrize(("text", "quoted"), [
    ("abc", '"abc"'), ('a"b\\c', '"a\\"b\\\\c"'), ("é-ü", '"é-ü"'), ("a\u200bb", '"a\\u200bb"'),
    ("\x00\x7f", '"\\x00\\x7f"'), ("a\nb\tc", '"a\\nb\\tc"'), ("\U0001f600", '"\U0001f600"'), ("\u00a0", '"\\u00a0"'),
])
def test_go_quote(text: str, quoted: str) -> None:
    from graders.grading.config_errors import go_quote

    assert go_quote(text) == quoted


def test_ids_are_trimmed_with_go_whitespace() -> None:
    plan = parse_graders({"\u00a0my-x\t": {"script": "return 1"}})
    assert _ids(plan) == ["my-x"]
    with pytest.raises(GradersConfigError, match="invalid id"):
        parse_graders({"\x1cmy-x": {"script": "return 1"}})  # Python's strip() would remove \x1c, Go's does not


# -- what gh-aw's frontmatter schema refuses: unknown keys, at every level -----------------------------

@pytest.mark.parametrize("suffix", [".yaml", ".md"])
def test_an_unknown_field_of_a_grader_is_an_error_with_a_did_you_mean(tmp_path: Path, suffix: str) -> None:
    f = tmp_path / f"w{suffix}"
    body = "graders:\n  tool-success-rate: {threshhold: 0.9}\n"
    f.write_text(f"---\non: push\n{body}---\n" if suffix == ".md" else body)
    with pytest.raises(GradersConfigError) as caught:
        load_graders(f)
    assert str(caught.value) == ('graders.tool-success-rate has an unknown field "threshhold"; did you mean '
                                 '"threshold"? (the fields are enabled, name, description, unit, direction, '
                                 'threshold, max, min, config, run, script)')
    f.write_text(f.read_text().replace("threshhold", "threshold"))  # spelt right, it takes effect
    [entry] = [e for e in load_graders(f).entries if e.id == "tool-success-rate"]
    assert entry.threshold == 0.9
    with pytest.raises(GradersConfigError, match=r'^graders.my-x has an unknown field "scirpt"; did you mean "script"'):
        parse_graders({"my-x": {"scirpt": "return 1"}})


def test_every_field_gh_aw_defines_is_accepted() -> None:
    plan = parse_graders({OV: {"enabled": True, "name": "V", "description": "d", "unit": "ratio",
                               "direction": "higher_is_better", "threshold": 0.5, "max": 1, "min": 0,
                               "config": {"k": 1}, "script": "#!/bin/bash\necho '[]'\n"}})
    assert plan is not None and plan.entries[0].config == {"k": 1}


def test_an_unknown_id_names_the_closest_and_every_configurable_id() -> None:
    with pytest.raises(GradersConfigError) as caught:
        parse_graders({"tool-sucess-rate": {}})
    assert str(caught.value) == _not_builtin("tool-sucess-rate")  # gh-aw's message, exactly
    hint = caught.value.hint
    assert hint.startswith('; did you mean "tool-success-rate"? Configurable ids: ')
    trajectory = registry.grader_ids("trajectory")
    assert len(trajectory) == 22 and all(gid in hint for gid in (*BUILTIN_IDS, *trajectory, OV))
    assert caught.value.describe().endswith("any other id needs a script")
    with pytest.raises(GradersConfigError) as far:
        parse_graders({"zzz": None})
    assert far.value.hint.startswith(". Configurable ids: ")


def test_unknown_keys_of_the_document_and_its_imports(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text("graders:\n  loops: {}\ngraderz: 1\n")
    with pytest.raises(GradersConfigError, match=r'^the document has an unknown field "graderz"; did you mean '
                                                 r'"graders"\? \(the fields are graders, imports\)$'):
        load_graders(f)
    f.write_text("grader:\n  loops: {}\n")  # the map itself, whose first key is a misspelt `graders:`
    with pytest.raises(GradersConfigError, match=r"^'grader' is neither a grader id nor a field of the document; "
                                                 r'did you mean "graders"\?$'):
        load_graders(f)
    md = tmp_path / "wf.md"
    md.write_text("---\non: push\ngradres:\n  loops: {}\n---\n")
    with pytest.raises(GradersConfigError, match=r"^the frontmatter has no graders map but has 'gradres'; did you"):
        load_graders(md)
    (tmp_path / "shared.yaml").write_text("graders:\n  loops: {threshold: 2}\n")
    md.write_text("---\non: push\nimports:\n  - {paht: shared.yaml}\ngraders: {}\n---\n")
    with pytest.raises(GradersConfigError, match=r'^imports\[0\] has an unknown field "paht"; did you mean "path"'):
        load_graders(md)
    md.write_text("---\non: push\nimports:\n  - {uses: shared.yaml, with: {x: 1}}\ngraders: {}\n---\n")
    [loops] = [e for e in load_graders(md).entries if e.id == "loops"]  # gh-aw's `uses`/`with` form
    assert loops.threshold == 2
