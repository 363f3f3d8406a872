"""The JavaScript helpers added for the trajectory graders: toFixed, safe integers, join and
the JavaScript regex translator (one test per dialect difference, plus a V8 differential test)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.jsrt.jscompat import UNDEFINED, is_safe_integer, js_join, js_to_fixed
from graders.jsrt.jsregex import JsRegexError, compile_js_regex, utf16_slice, utf16_units


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [(0.625, 2, "0.63"), (1.005, 2, "1.00"), (2.5, 0, "3"), (-2.5, 0, "-3"), (0.125, 2, "0.13"),
     (-0.0, 2, "0.00"), (-0.001, 2, "-0.00"), (3, 4, "3.0000"), (1e21, 2, "1e+21"), (1.58496250072, 4, "1.5850")],
)
def test_js_to_fixed(value: float, digits: int, text: str) -> None:
    assert js_to_fixed(value, digits) == text


def test_is_safe_integer_and_join() -> None:
    assert is_safe_integer(3) and is_safe_integer(3.0) and is_safe_integer(-(2**53 - 1))
    assert not any(is_safe_integer(v) for v in (True, 2**53, 1.5, float("nan"), "3", None))
    assert js_join(["a", None, UNDEFINED, 1.0, [1, 2]], ", ") == "a, , , 1, 1,2"


def test_utf16_views() -> None:
    assert utf16_units("a\U0001f600") == "a\ud83d\ude00"
    assert utf16_slice("ab\U0001f600", 3) == "ab\ud83d"
    assert utf16_slice("ab\U0001f600", 4) == "ab\U0001f600"


def matches(pattern: str, text: str, flags: str = "i") -> bool:
    return compile_js_regex(pattern, flags).search(utf16_units(text)) is not None


def invalid(pattern: str, flags: str = "i") -> bool:
    try:
        compile_js_regex(pattern, flags)
    except JsRegexError:
        return True
    return False


def test_named_groups_and_named_backreferences() -> None:
    assert matches(r"(?<word>ab)-\k<word>", "AB-ab")
    assert invalid("(?<x>")  # unclosed: invalid in both dialects
    assert invalid("(?<x>a)(?<x>b)")  # duplicate name
    assert invalid(r"(?<x>a)\k<y>")
    assert matches(r"\k<y>", "k<y>")  # without named groups, \k is an identity escape


def test_digit_word_space_are_javascript_sets() -> None:
    assert not matches(r"\d", "\u0663")  # Arabic-Indic three: Python's \d would match
    assert not matches(r"\w", "\u00e9")
    assert not matches(r"\s", "\x1c") and not matches(r"\s", "\x85")
    assert matches(r"\s", "\u00a0") and matches(r"\s", "\ufeff")
    assert matches(r"\bab\b", "x ab.") and matches(r"\bab", "\u00e9ab") is not False


def test_dollar_is_the_very_end_and_dot_excludes_line_terminators() -> None:
    assert not matches("a$", "a\n")  # Python's $ also matches before a final newline
    assert matches("a$", "a")
    assert not matches("a.b", "a\rb") and not matches("a.b", "a\u2028b")
    assert matches("a.b", "a\x85b")


def test_empty_and_any_classes() -> None:
    assert matches("a[^]b", "a\nb")
    assert not matches("a[]", "a]")  # [] matches nothing in JS; Python would read "[]...]"
    assert not matches("[]a]", "a]")
    assert matches("[^]a]", "xa]")


def test_identity_escapes_and_python_only_escapes() -> None:
    assert matches(r"\Z", "z") and matches(r"\A", "a")  # identity escapes in JS, not anchors
    assert matches(r"a\/b", "a/b")
    assert matches(r"\p{L}", "p{L}")  # no u flag: "p" then literal braces
    assert matches(r"\8", "8")
    assert matches(r"\101", "A")  # legacy octal, no such group
    assert matches(r"\c", "\\c") and matches(r"\cJ", "\n")


def test_braces_and_quantifiers() -> None:
    assert matches("a{", "a{") and matches("}", "}") and matches("a{,3}", "a{,3}")  # Python: {0,3}
    assert matches("a{2}", "aa") and not matches("^a{2}$", "aaa")
    assert invalid("{2}") and invalid("a**") and invalid("a*+") and invalid("a{2}{3}")  # possessive in Python
    assert invalid("a{3,2}") and invalid("^*") and invalid(r"\b+")
    assert matches("(?=a)*b", "b")  # Annex B: quantified lookahead
    assert invalid("(?<=a)*b")


def test_inline_flags_and_python_only_groups() -> None:
    assert invalid("(?i)abc")  # flags without a group are not JavaScript
    assert invalid("(?P<x>a)") and invalid("(?#c)") and invalid("(?>a)")
    assert matches("(?i:A)b", "ab", flags="") and not matches("(?i:A)b", "aB", flags="")
    assert not matches("(?-i:A)", "a") and invalid("(?-:a)") and invalid("(?ii:a)")


def test_case_folding_is_javascript_canonicalize() -> None:
    assert matches("\u00e9criRE", "\u00c9CRIRE")
    assert not matches("k", "\u212a")  # Kelvin sign: Python's IGNORECASE would match
    assert not matches("s", "\u017f") and not matches("i", "\u0131")
    assert matches("[a-z]+", "ABC") and not matches("[a-z]", "\u212a")
    assert not matches("[^a-z]", "A")
    assert matches("\u03c3", "\u03c2")  # final sigma: both upper-case to Σ


def test_backreferences() -> None:
    assert matches(r"(a)\1", "aA")
    assert matches(r"\1(a)", "a")  # forward reference: empty in JS
    assert matches(r"(a\1)", "a")  # self reference: empty
    assert matches(r"(?:(a)|b)\1c", "bc")  # non-participating group: empty in JS, a failure in Python


def test_class_ranges_with_class_escapes_are_unions() -> None:
    assert matches(r"[\w-]", "-") and matches(r"[\d-z]", "-") and matches(r"[\d-z]", "z")
    assert not matches(r"[\d-z]", "m")
    assert invalid("[z-a]")
    assert matches(r"[\b]", "\x08") and matches(r"[\B]", "b")


def test_astral_characters_are_two_code_units() -> None:
    assert matches("^.$", "\ud83d") and not matches("^.$", "\U0001f600")
    assert matches("^..$", "\U0001f600")
    assert matches("\U0001f600", "x\U0001f600")


def test_untranslatable_lookbehind_is_invalid() -> None:
    with pytest.raises(JsRegexError, match="untranslatable"):
        compile_js_regex("(?<=a|bc)x", "i")
    assert matches("(?<=a)x", "ax")


try:  # a real V8 (mini-racer) when installed; the differential test is skipped otherwise
    from py_mini_racer import MiniRacer

    from graders.families.inline_js.sandbox import _init_v8

    # V8 takes its flags once per process: start it as the inline-grader sandbox does, so the
    # sandbox tests that share this process still get a hardened V8.
    _init_v8()

    _V8: MiniRacer | None = MiniRacer()
    _V8.eval(  # type: ignore[union-attr]
        "function probe(p, s, f) { let r; try { r = new RegExp(p, f); } catch (e) { return null; }"
        " return s.map(x => r.test(x)); }"
    )
except Exception:  # pragma: no cover - optional dependency
    _V8 = None

_ATOMS = [*"ab.AZkK$^|*+?{}[]()-,\\/0129", r"\d", r"\w", r"\s", r"\D", r"\b", r"\B", r"\Z", "(?:", "(?=",
          "(?!", "(?<n>", r"\k<n>", r"\1", "{2}", "{1,3}", "{,2}", "[^", r"\u0041", r"\x4a", r"\c", r"\cA",
          "\u017f", "\u0131", "\u00e9", "\u00c9", "\u212a", "\U0001f600", "\n", "(?i)", "(?i:", "(?-i:", "[^]", "[]"]
_SUBJECTS = ["", "a", "A", "ab", "aB{}", "b\na", "a\r\nb", "\u2028a", "k", "K", "\u212a", "\u017f", "Z", "\n", "a\n", "12", "A-Z", "\u00e9",
             "\u00c9", "\U0001f600", "\\c", "x\x01", "{,2}", "aa", "abab", "kK", "-", " ", "\x1c", "I", "\u0131"]


@pytest.mark.skipif(_V8 is None, reason="mini-racer (V8) is not installed")
@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), min_size=1, max_size=8), st.sampled_from(["i", "i", "", "m", "is", "ims"]))
def test_translation_agrees_with_v8(atoms: list[str], flags: str) -> None:
    pattern = "".join(atoms)
    assert _V8 is not None
    call = f"probe({json.dumps(pattern)}, {json.dumps(_SUBJECTS)}, {json.dumps(flags)})"
    expected = json.loads(str(_V8.eval(f"JSON.stringify({call})")))
    try:
        regex = compile_js_regex(pattern, flags)
    except JsRegexError as exc:
        if "untranslatable" in str(exc) and "look-behind" in str(exc):
            return  # documented limit: Python needs fixed-width lookbehind
        assert expected is None, f"{pattern!r} is valid JavaScript: {exc}"
        return
    got = [regex.search(utf16_units(s)) is not None for s in _SUBJECTS]
    assert got == expected, pattern
