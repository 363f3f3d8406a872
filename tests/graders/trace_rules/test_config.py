from __future__ import annotations

import io

import pytest

from graders.families.trace_rules.config import ConfigError, from_mapping, load_config, load_mapping, merge


def write(tmp_path, text: str):
    p = tmp_path / "c.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_missing_file_is_silent_defaults(tmp_path):
    err = io.StringIO()
    cfg = load_config(tmp_path / "nope.yaml", err)
    assert (cfg.retry_threshold, cfg.step_budget, cfg.grounding_enabled) == (3, 40, True)
    assert err.getvalue() == ""


def test_one_level_merge_keeps_nested_defaults(tmp_path):
    cfg = load_config(write(tmp_path, "judge:\n  model: m\ngrounding:\norder_constraints: {}\nretry_threshold: '2'\n"))
    assert cfg.grounding_enabled and cfg.must_precede == () and not cfg.judge_enabled
    assert cfg.retry_threshold == 2
    assert merge({"judge": {"model": "m"}})["judge"] == {"enabled": False, "model": "m", "rubric": []}


@pytest.mark.parametrize("text", ["a: [b\n", "- 1\n- 2\n", "judge: [1]\n", "just a string\n"])
def test_unusable_file_warns_and_uses_defaults(tmp_path, text):
    err = io.StringIO()
    assert load_mapping(write(tmp_path, text), err)["retry_threshold"] == 3
    assert err.getvalue().startswith("[trace-grader] config load failed (")
    assert err.getvalue().rstrip().endswith("; using defaults")


@pytest.mark.parametrize(
    ("text", "key"),
    [("retry_threshold: null\n", "retry_threshold"), ("step_budget: ~\n", "step_budget"),
     ("step_budget: many\n", "step_budget"), ("retry_threshold: [1]\n", "retry_threshold"),
     ("forbidden_tools: force_push\n", "forbidden_tools")],
)
def test_unusable_values_are_config_errors_naming_the_key(tmp_path, text, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        load_config(write(tmp_path, text))


def test_values_follow_reference_coercions():
    cfg = from_mapping(merge({"verified": "no", "judge": {"enabled": 1}, "forbidden_tools": ["a", 5, None],
                              "order_constraints": {"must_precede": [["a", "b"], ["c"], "de", ["x", "y", "z"]]}}))
    assert cfg.judge_axis == "active"  # truthiness, as in the reference
    assert cfg.forbidden_tools == frozenset({"a"})
    assert cfg.must_precede == (("a", "b"),)
    assert from_mapping(merge({"retry_threshold": 2.9, "step_budget": True})).retry_threshold == 2
