"""User regexes match in bounded time and answer exactly as the ``re`` translation does."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from graders.grading.engine import grade_one
from graders.grading.plan import PlanEntry
from graders.grading.registry import GraderContext
from graders.jsrt import jsmatch
from graders.jsrt.jsmatch import Budget, JsRegexTimeout, compile_js_matcher, to_re2
from graders.jsrt.jsregex import JsRegexError, compile_js_regex, utf16_units

CATASTROPHIC_LINEAR = "(a+)+$"
# Lookahead keeps this one off RE2; it backtracks exponentially in any backtracking engine.
CATASTROPHIC_BACKTRACKING = "(a|a)+$(?!x)"


def _trace(argument: str) -> dict:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": argument}, "success": True}]}


def _grade(pattern: str, argument: str) -> dict:
    entry = PlanEntry(id="skill-constraint-coverage", name="c", source="builtin")
    config = {"constraints": [{"id": "c", "pattern": pattern}]}
    return grade_one(entry, _trace(argument), GraderContext(config=config))


def test_nested_quantifier_runs_on_the_linear_engine():
    matcher = compile_js_matcher(CATASTROPHIC_LINEAR, "i")
    assert matcher.linear is not None
    assert matcher.search("a" * 40 + "!") is False
    assert matcher.search("x" + "a" * 40) is True
    result = _grade(CATASTROPHIC_LINEAR, "a" * 40 + "!")
    assert "error" not in result and result["value"] == 0


def test_backtracking_pattern_past_its_budget_is_a_grader_error(monkeypatch):
    monkeypatch.setattr(jsmatch, "DEFAULT_BUDGET_S", 0.2)
    assert compile_js_matcher(CATASTROPHIC_BACKTRACKING, "i").linear is None
    result = _grade(CATASTROPHIC_BACKTRACKING, "a" * 40 + "!")
    assert result["status"] == "error"
    assert result["error"] == (
        f"grader skill-constraint-coverage runtime error: pattern /{CATASTROPHIC_BACKTRACKING}/ ran past the "
        "0.2s matching budget (a backtracking pattern: backreferences or lookaround)"
    )


def test_budget_is_shared_by_the_searches_of_one_evaluation():
    matcher = compile_js_matcher(CATASTROPHIC_BACKTRACKING, "i")
    budget = Budget(0.0)
    with pytest.raises(JsRegexTimeout):
        budget.search(matcher, "a" * 40 + "!")


def test_backreferences_still_match_on_the_budgeted_engine():
    matcher = compile_js_matcher(r"(ab)\1", "i")
    assert matcher.linear is None
    assert matcher.search("xABab") is True
    assert matcher.search("abba") is False


def test_surrogates_in_the_subject_use_the_budgeted_engine():
    matcher = compile_js_matcher("a.b", "")
    assert matcher.linear is not None
    text = utf16_units("a\U0001F600b")  # two code units: "." matches one
    assert matcher.search(text) is False
    assert matcher.search(utf16_units("a\U0001F600")[:2] + "b") is True


def test_re2_spellings():
    assert to_re2(compile_js_regex(r"\bgit\b", "").pattern) == r"\bgit\b"
    assert to_re2(compile_js_regex(r"\bgit\B", "").pattern) is None  # \B: see the test below
    assert to_re2(compile_js_regex("[^a-c]$", "").pattern) == r"[^a-c]\z"
    assert to_re2(compile_js_regex("\u00e9", "").pattern) == r"\x{00E9}"
    assert to_re2(compile_js_regex("(?=a)", "").pattern) is None
    assert to_re2(compile_js_regex("\\ud83d", "").pattern) is None


_TOKENS = [
    "a", "b", "A", "1", "_", ".", "-", " ", "\u00e9", "\u2028", r"\b", r"\B", r"\d", r"\D", r"\w", r"\W",
    r"\s", r"\S", "[^ab]", "[a-c]", r"[^\d]", r"[\s\S]", "[^]", "[]", r"[\w-]", "^", "$", "(", ")", "(?:",
    "|", "*", "+", "?", "*?", "{2}", "{1,3}", "{0,}", r"\u0041", r"\x62", "[A-Z]",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    pattern=st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=8).map("".join),
    flags=st.sampled_from(["", "i", "m", "s", "im"]),
    subjects=st.lists(st.text(alphabet="aAbB1_ -\n\r\u2028\u00e9\u00c9xZ", max_size=12), min_size=1, max_size=5),
)
def test_linear_engine_agrees_with_re(pattern: str, flags: str, subjects: list[str]) -> None:
    try:
        reference = compile_js_regex(pattern, flags)
    except JsRegexError:
        assume(False)
        return
    matcher = compile_js_matcher(pattern, flags)
    for subject in subjects:
        expected = reference.search(subject) is not None
        assert matcher.search(subject) is expected, (pattern, flags, subject)
        # The budgeted engine answers alike too, also where code units are lone surrogates.
        assert (matcher.backtracking.search(subject) is not None) is expected, (pattern, flags, subject)
        paired = utf16_units("\U0001F600" + subject)
        assert matcher.search(paired) is (reference.search(paired) is not None), (pattern, flags, paired)


def test_a_negated_word_boundary_never_matches_inside_a_non_ascii_character() -> None:
    """RE2 reads UTF-8: its ``\\B`` matched between the two bytes of 'É' (hypothesis found it)."""
    matcher = compile_js_matcher(r"\B", "")
    assert compile_js_regex(r"\B", "").search("1É1") is None  # JS: \w is ASCII, every gap is a boundary
    assert not matcher.search("1É1")
    assert matcher.search("ab")
