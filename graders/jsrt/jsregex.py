"""JavaScript regular expressions (``new RegExp(pattern, flags)``) translated to Python ``re``.

Used by the trajectory constraint graders (through ``jsmatch``, which runs the translation on a
linear-time engine where it can).
"""

from __future__ import annotations

import re
from typing import Final

from graders.jsrt.jscompat import utf16_len

#
# gh-aw compiles user patterns with ``new RegExp(pattern, "i")``: a non-unicode JavaScript
# regex with the Annex B (web-compatibility) grammar. Python's ``re`` differs in syntax and in
# meaning, so a pattern is parsed with the JavaScript grammar (deciding validity as JavaScript
# does) and re-emitted as an explicit Python pattern:
#
# - the pattern and the subject are both seen as UTF-16 code units (``utf16_units``): a
#   non-unicode JS regex matches code units, so "." matches half of an emoji;
# - every character and class is emitted explicitly: ``\d`` is [0-9] (Python's is Unicode),
#   ``\s`` is the JS whitespace set (Python's adds \x1c-\x1f and \x85), ``\w``/``\b`` are ASCII,
#   "." excludes \n \r \u2028 \u2029 (Python's only \n), ``$`` is the very end (Python's ``$``
#   also matches before a final newline), ``[^]`` is any character and ``[]`` nothing;
# - the "i" flag is applied by expanding each literal and range into its JS case-equivalents
#   (JS Canonicalize: simple upper-casing that never maps a non-ASCII character to ASCII),
#   not with re.IGNORECASE, whose Unicode folding also equates k/K (Kelvin), s/ſ, i/ı/İ, ß/ẞ;
# - Annex B leniency is reproduced: identity escapes (``\A`` is "A", ``\Z`` is "Z", ``\/``),
#   lone ``{``, ``}`` and ``]`` are literals, ``\8`` is "8", ``\12`` without 12 groups is an
#   octal escape, ``\c`` without a letter is a backslash, class ranges with a class escape
#   (``[\w-a]``) are unions, lookaheads may be quantified;
# - ``(?ims-ims:...)`` modifier groups (ES2025; the Node 24 that runs github-script accepts them)
#   scope the flags to their group;
# - JS errors stay errors: ``(?i)`` (flags without a group), ``(?P<...>``, ``(?#...)``,
#   ``(?>...)``, possessive ``a*+``, ``a**``, ``{2}`` with nothing to repeat, out-of-order
#   ranges and quantifier bounds, unterminated groups and classes, bad group names;
# - named groups ``(?<x>...)`` become numbered groups; a backreference to a group that has not
#   closed yet (forward or self reference) matches empty, as in JS, and one to a group that did
#   not participate matches empty through ``(?(n)...)``.
#
# Known limits, documented in docs/deviations-trajectory.md: under "i" a backreference uses
# Python's Unicode case folding (``(?i:\1)``); lookbehind must be fixed-width in Python, so a
# variable-width lookbehind raises JsRegexError ("untranslatable") and counts as invalid;
# quantifier bounds above 65535 are clamped to 65535 (exact for subjects shorter than that).


class JsRegexError(ValueError):
    """The pattern is not a valid JavaScript regex, or cannot be translated to Python."""


def utf16_units(text: str) -> str:
    """``text`` with each astral character split into its two surrogate code units."""
    if text.isascii() or all(ord(ch) <= 0xFFFF for ch in text):
        return text
    out = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(chr(0xD800 + (cp >> 10)))
            out.append(chr(0xDC00 + (cp & 0x3FF)))
        else:
            out.append(ch)
    return "".join(out)


def utf16_slice(text: str, end: int) -> str:
    """``text.slice(0, end)`` in JS: counted in UTF-16 units, possibly splitting a pair.

    A split pair leaves a lone high surrogate, as in JavaScript; the result is a code-unit
    string (see ``utf16_units``) only when a pair was split.
    """
    if utf16_len(text) <= end:
        return text
    return utf16_units(text)[:end]


_REPEAT_CAP: Final = 65535
_LINE_TERMINATORS: Final = "\n\r\u2028\u2029"
_JS_SPACE: Final = "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)
def _esc(ch: str) -> str:
    """One code unit as an unambiguous Python pattern escape."""
    if ch.isascii() and ch.isalnum():
        return ch
    return f"\\u{ord(ch):04x}"


def _set_items(chars: str) -> str:
    return "".join(_esc(c) for c in chars)


_ESCAPE_SETS: Final = {
    "d": "0-9",
    "w": "A-Za-z0-9_",
    "s": _set_items(_JS_SPACE),
}
_WB: Final = "[A-Za-z0-9_]"
_WORD_BOUNDARY: Final = f"(?:(?<={_WB})(?!{_WB})|(?<!{_WB})(?={_WB}))"
_NOT_WORD_BOUNDARY: Final = f"(?:(?<={_WB})(?={_WB})|(?<!{_WB})(?!{_WB}))"


def _canonicalize(cu: int) -> int:
    """JS Canonicalize(ch) for a non-unicode, ignoreCase regex."""
    upper = chr(cu).upper()
    if len(upper) != 1:
        return cu
    up = ord(upper)
    if cu >= 128 and up < 128:
        return cu
    return up


_CASE_GROUPS: dict[int, tuple[int, ...]] | None = None
_MULTI_GROUPS: list[tuple[int, ...]] = []


def _case_groups() -> dict[int, tuple[int, ...]]:
    """Code unit -> every code unit with the same canonical form (only for groups of 2+)."""
    global _CASE_GROUPS
    if _CASE_GROUPS is None:
        by_canon: dict[int, list[int]] = {}
        for cu in range(0x10000):
            by_canon.setdefault(_canonicalize(cu), []).append(cu)
        groups: dict[int, tuple[int, ...]] = {}
        for members in by_canon.values():
            if len(members) > 1:
                group = tuple(members)
                _MULTI_GROUPS.append(group)
                for m in members:
                    groups[m] = group
        _CASE_GROUPS = groups
    return _CASE_GROUPS


def _range_items(lo: int, hi: int, ignore_case: bool) -> str:
    items = _esc(chr(lo)) if lo == hi else f"{_esc(chr(lo))}-{_esc(chr(hi))}"
    if not ignore_case:
        return items
    groups = _case_groups()
    if lo == hi:
        extra = [m for m in groups.get(lo, ()) if m != lo]
    else:
        extra = sorted({m for g in _MULTI_GROUPS if any(lo <= m <= hi for m in g) for m in g if not lo <= m <= hi})
    return items + "".join(_esc(chr(m)) for m in extra)


class _JsRegexParser:
    """Recursive descent over the non-unicode (Annex B) JavaScript pattern grammar."""

    def __init__(self, source: str, flags: str) -> None:
        self.src = utf16_units(source)
        self.pos = 0
        self.ignore_case = "i" in flags
        self.multiline = "m" in flags
        self.dot_all = "s" in flags
        self.group_names: dict[str, int] = {}
        self.total_groups, self.has_named = self._scan_groups()
        self.opened = 0  # capturing groups opened so far
        self.closed: set[int] = set()

    def fail(self, why: str) -> JsRegexError:
        return JsRegexError(f"Invalid regular expression: /{self.src}/: {why}")

    def _scan_groups(self) -> tuple[int, bool]:
        count = 0
        named = False
        i, n, in_class = 0, len(self.src), False
        while i < n:
            ch = self.src[i]
            if ch == "\\":
                i += 2
                continue
            if in_class:
                in_class = ch != "]"
            elif ch == "[":
                in_class = True
            elif ch == "(":
                if not self.src.startswith("(?", i):
                    count += 1
                elif self.src.startswith("(?<", i) and self.src[i + 3 : i + 4] not in ("=", "!"):
                    count += 1
                    named = True
            i += 1
        return count, named

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.src[i] if i < len(self.src) else ""

    def translate(self) -> str:
        out = self.disjunction()
        if self.pos < len(self.src):
            raise self.fail("Unmatched ')'" if self.peek() == ")" else "Unexpected character")
        return out

    def disjunction(self) -> str:
        parts = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            parts.append(self.alternative())
        return "|".join(parts)

    def alternative(self) -> str:
        out = []
        while self.pos < len(self.src) and self.peek() not in ("|", ")"):
            out.append(self.term())
        return "".join(out)

    def _braced_quantifier(self) -> tuple[int, int | None, int] | None:
        """``{n}``, ``{n,}`` or ``{n,m}`` at pos: (min, max, length) or None if not one."""
        m = re.match(r"\{([0-9]+)(,([0-9]*))?\}", self.src[self.pos :])
        if not m:
            return None
        lo = int(m.group(1))
        hi: int | None = lo
        if m.group(2):
            hi = int(m.group(3)) if m.group(3) else None
        return lo, hi, m.end()

    def term(self) -> str:
        ch = self.peek()
        quantifiable = True
        if ch == "^":
            self.pos += 1
            atom = r"(?:(?<![\s\S])|(?<=[\n\r\u2028\u2029]))" if self.multiline else r"\A"
            quantifiable = False
        elif ch == "$":
            self.pos += 1
            atom = r"(?=[\n\r\u2028\u2029]|(?![\s\S]))" if self.multiline else r"\Z"
            quantifiable = False
        elif ch == "\\" and self.peek(1) in ("b", "B"):
            self.pos += 2
            atom = _WORD_BOUNDARY if ch and self.src[self.pos - 1] == "b" else _NOT_WORD_BOUNDARY
            quantifiable = False
        elif ch == "(":
            atom, quantifiable = self.group()
        else:
            atom = self.atom()
        return self.quantified(atom, quantifiable)

    def quantified(self, atom: str, quantifiable: bool) -> str:
        ch = self.peek()
        quant = ""
        if ch in ("*", "+", "?"):
            quant = ch
            self.pos += 1
        elif ch == "{":
            braced = self._braced_quantifier()
            if braced is not None:
                lo, hi, length = braced
                if hi is not None and lo > hi:
                    raise self.fail("numbers out of order in {} quantifier")
                self.pos += length
                lo_c = min(lo, _REPEAT_CAP)
                hi_c = None if hi is None else min(hi, _REPEAT_CAP)
                quant = f"{{{lo_c},{'' if hi_c is None else hi_c}}}"
        if not quant:
            return atom
        if not quantifiable:
            raise self.fail("Nothing to repeat")
        if self.peek() == "?":
            quant += "?"
            self.pos += 1
        nxt = self.peek()
        if nxt in ("*", "+", "?") or (nxt == "{" and self._braced_quantifier() is not None):
            raise self.fail("Nothing to repeat")
        return f"(?:{atom}){quant}"

    def group(self) -> tuple[str, bool]:
        src = self.src
        start = self.pos
        if src.startswith("(?:", start):
            self.pos += 3
            kind, quantifiable = "(?:", True
        elif src.startswith("(?=", start) or src.startswith("(?!", start):
            self.pos += 3
            kind, quantifiable = src[start : start + 3], True  # Annex B: lookaheads may be quantified
        elif src.startswith("(?<=", start) or src.startswith("(?<!", start):
            self.pos += 4
            kind, quantifiable = src[start : start + 4], False
        elif src.startswith("(?<", start):
            self.pos += 3
            name = self.group_name()
            if name in self.group_names:
                raise self.fail("Duplicate capture group name")
            self.opened += 1
            self.group_names[name] = self.opened
            kind, quantifiable = "(", True
        elif src.startswith("(?", start):
            return self.modifier_group()
        else:
            self.pos += 1
            self.opened += 1
            kind, quantifiable = "(", True
        number = self.opened if kind == "(" else None
        body = self.disjunction()
        if self.peek() != ")":
            raise self.fail("Unterminated group")
        self.pos += 1
        if number is not None:
            self.closed.add(number)
        return f"{kind}{body})", quantifiable

    def modifier_group(self) -> tuple[str, bool]:
        """``(?ims-ims:...)``: flags scoped to the group (ES2025 modifiers, V8 12.5+)."""
        m = re.match(r"\(\?([a-z]*)(?:-([a-z]*))?:", self.src[self.pos :])
        if not m:
            raise self.fail("Invalid group")
        add, remove = m.group(1), m.group(2) or ""
        both = add + remove
        if (
            (m.group(2) is not None and not both)
            or set(both) - set("ims")
            or len(set(both)) != len(both)
        ):
            raise self.fail("Invalid regular expression modifiers")
        self.pos += m.end()
        saved = (self.ignore_case, self.multiline, self.dot_all)
        for flag, on in [(f, True) for f in add] + [(f, False) for f in remove]:
            if flag == "i":
                self.ignore_case = on
            elif flag == "m":
                self.multiline = on
            else:
                self.dot_all = on
        body = self.disjunction()
        self.ignore_case, self.multiline, self.dot_all = saved
        if self.peek() != ")":
            raise self.fail("Unterminated group")
        self.pos += 1
        return f"(?:{body})", True

    def group_name(self) -> str:
        end = self.src.find(">", self.pos)
        if end == -1:
            raise self.fail("Invalid capture group name")
        name = self.src[self.pos : end]
        if not name or not (name.replace("$", "_").isidentifier()):
            raise self.fail("Invalid capture group name")
        self.pos = end + 1
        return name

    def backreference(self, number: int) -> str:
        if number not in self.closed:
            return "(?:)"  # forward or self reference: the group is still undefined in JS
        ref = f"(?i:\\{number})" if self.ignore_case else f"\\{number}"
        return f"(?({number}){ref})"

    def literal(self, ch: str) -> str:
        cu = ord(ch)
        if self.ignore_case and cu in _case_groups():
            return "[" + _range_items(cu, cu, True) + "]"
        return _esc(ch)

    def atom(self) -> str:
        ch = self.peek()
        if ch == ".":
            self.pos += 1
            return r"[\s\S]" if self.dot_all else r"[^\n\r\u2028\u2029]"
        if ch == "[":
            return self.char_class()
        if ch in ("*", "+", "?"):
            raise self.fail("Nothing to repeat")
        if ch == "{" and self._braced_quantifier() is not None:
            raise self.fail("Nothing to repeat")
        if ch == ")":
            raise self.fail("Unmatched ')'")
        if ch == "\\":
            return self.atom_escape()
        self.pos += 1
        return self.literal(ch)

    def _decimal(self) -> str:
        m = re.match(r"[0-9]+", self.src[self.pos :])
        return m.group(0) if m else ""

    def _legacy_octal(self) -> str:
        """LegacyOctalEscapeSequence at pos (after the backslash): the code unit it denotes."""
        m = re.match(r"[0-3][0-7]{0,2}|[4-7][0-7]?", self.src[self.pos :])
        assert m is not None
        self.pos += m.end()
        return chr(int(m.group(0), 8))

    def character_escape(self, in_class: bool) -> str | None:
        """A CharacterEscape after the backslash (pos on the escape letter), as a code unit.

        Returns None for ``\\c`` without a control letter: then the backslash is literal.
        """
        ch = self.peek()
        if ch == "":
            raise self.fail("\\ at end of pattern")
        controls = {"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
        if ch in controls:
            self.pos += 1
            return controls[ch]
        if ch == "c":
            letter = self.peek(1)
            ok = letter.isascii() and (letter.isalpha() or (in_class and (letter.isdigit() or letter == "_")))
            if letter and ok:
                self.pos += 2
                return chr(ord(letter) % 32)
            return None
        if ch == "0" and not self.peek(1).isdigit():
            self.pos += 1
            return "\0"
        if ch in "01234567":
            return self._legacy_octal()
        if ch == "x":
            m = re.match(r"x([0-9A-Fa-f]{2})", self.src[self.pos :])
            if m:
                self.pos += 3
                return chr(int(m.group(1), 16))
        if ch == "u":
            m = re.match(r"u([0-9A-Fa-f]{4})", self.src[self.pos :])
            if m:
                self.pos += 5
                return chr(int(m.group(1), 16))
        if ch == "k" and self.has_named:
            raise self.fail("Invalid named reference")
        self.pos += 1
        return ch  # identity escape (Annex B: any character but "c")

    def atom_escape(self) -> str:
        self.pos += 1  # the backslash
        ch = self.peek()
        if ch in _ESCAPE_SETS:
            self.pos += 1
            return f"[{_ESCAPE_SETS[ch]}]"
        if ch.lower() in _ESCAPE_SETS:
            self.pos += 1
            return f"[^{_ESCAPE_SETS[ch.lower()]}]"
        if ch == "k" and self.has_named:
            m = re.match(r"k<([^>]*)>", self.src[self.pos :])
            if not m or m.group(1) not in self._all_group_names():
                raise self.fail("Invalid named capture referenced")
            self.pos += m.end()
            return self.backreference(self._all_group_names()[m.group(1)])
        if ch.isdigit() and ch != "0":
            digits = self._decimal()
            if int(digits) <= self.total_groups:
                self.pos += len(digits)
                return self.backreference(int(digits))
            if ch in "89":
                self.pos += 1
                return _esc(ch)
        unit = self.character_escape(in_class=False)
        if unit is None:
            return _esc("\\")  # "\c" without a letter: a literal backslash, then "c"
        return self.literal(unit)

    def _all_group_names(self) -> dict[str, int]:
        """Every named group of the pattern, numbered in order (a reference may precede it)."""
        names: dict[str, int] = {}
        number = 0
        i, n, in_class = 0, len(self.src), False
        while i < n:
            ch = self.src[i]
            if ch == "\\":
                i += 2
                continue
            if in_class:
                in_class = ch != "]"
            elif ch == "[":
                in_class = True
            elif ch == "(" and not self.src.startswith("(?", i):
                number += 1
            elif self.src.startswith("(?<", i) and self.src[i + 3 : i + 4] not in ("=", "!"):
                number += 1
                end = self.src.find(">", i)
                names.setdefault(self.src[i + 3 : end], number)
            i += 1
        return names

    def class_atom(self) -> tuple[str, int | None]:
        """One ClassAtom: (rendered set, code unit or None when it is a class escape)."""
        ch = self.peek()
        if ch != "\\":
            self.pos += 1
            return "", ord(ch)
        self.pos += 1
        esc = self.peek()
        if esc == "":
            raise self.fail("\\ at end of pattern")
        if esc in _ESCAPE_SETS:
            self.pos += 1
            return _ESCAPE_SETS[esc], None
        if esc.lower() in _ESCAPE_SETS:
            self.pos += 1
            return "NEG:" + esc.lower(), None
        if esc == "b":
            self.pos += 1
            return "", 8
        if esc == "-":
            self.pos += 1
            return "", ord("-")
        if esc in "89":
            self.pos += 1
            return "", ord(esc)
        unit = self.character_escape(in_class=True)
        if unit is None:
            return "", ord("\\")  # "\c" + non-letter: the backslash itself, "c" follows
        return "", ord(unit)

    def char_class(self) -> str:
        self.pos += 1  # "["
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        items: list[str] = []
        negated_escapes: list[str] = []

        def add_escape(rendered: str) -> None:
            if rendered.startswith("NEG:"):
                negated_escapes.append(rendered[4:])
            else:
                items.append(rendered)

        while True:
            if self.pos >= len(self.src):
                raise self.fail("Unterminated character class")
            if self.peek() == "]":
                self.pos += 1
                break
            rendered, lo = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                rendered_hi, hi = self.class_atom()
                if lo is None or hi is None:
                    # Annex B: a range with a class escape is the union of its parts and "-".
                    for r, u in ((rendered, lo), (rendered_hi, hi)):
                        if u is None:
                            add_escape(r)
                        else:
                            items.append(_range_items(u, u, self.ignore_case))
                    items.append(_esc("-"))
                    continue
                if lo > hi:
                    raise self.fail("Range out of order in character class")
                items.append(_range_items(lo, hi, self.ignore_case))
                continue
            if lo is None:
                add_escape(rendered)
            else:
                items.append(_range_items(lo, lo, self.ignore_case))
        # A negated escape (\D, \S, \W) inside a class: union via an alternation of classes.
        positive = f"[{''.join(items)}]" if items else "(?!)"
        alternatives = [positive] if items else []
        alternatives += [f"[^{_ESCAPE_SETS[e]}]" for e in negated_escapes]
        if not alternatives:
            return r"[\s\S]" if negate else "(?!)"  # [^] is any unit, [] is none
        union = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        if not negate:
            return union
        return f"(?:(?!{union})[\\s\\S])"


_JS_REGEX_CACHE: dict[tuple[str, str], re.Pattern[str]] = {}


def translate_js_regex(source: str, flags: str = "") -> str:
    """The Python ``re`` pattern equivalent to ``new RegExp(source, flags)``.

    Raises JsRegexError when JavaScript would throw a SyntaxError. Supported flags: i, m, s
    (g and y do not change whether ``test`` matches a fresh regex; u and v are not supported).
    """
    unknown = set(flags) - set("imsgy")
    if unknown or len(set(flags)) != len(flags):
        raise JsRegexError(f"Invalid flags supplied to RegExp constructor '{flags}'")
    return _JsRegexParser(source, flags).translate()


def compile_js_regex(source: str, flags: str = "") -> re.Pattern[str]:
    """Compile a JavaScript regex for ``search`` over ``utf16_units`` text (cached)."""
    key = (source, flags)
    cached = _JS_REGEX_CACHE.get(key)
    if cached is not None:
        return cached
    translated = translate_js_regex(source, flags)
    try:
        compiled = re.compile(translated)
    except (re.error, OverflowError, RecursionError) as exc:
        raise JsRegexError(f"untranslatable JavaScript regex /{source}/: {exc}") from exc
    if len(_JS_REGEX_CACHE) < 4096:
        _JS_REGEX_CACHE[key] = compiled
    return compiled
