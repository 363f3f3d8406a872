"""Inline JS graders: memory outside the V8 heap is capped, and locale-dependent output is fixed."""

from __future__ import annotations

import pytest

from graders.families.inline_js.sandbox import JsGraderError, JsSandbox

# 16 ArrayBuffers of 256 MiB: 4 GiB of backing stores, none of it on the V8 heap.
ARRAY_BUFFERS = "const kept = []; for (let i = 0; i < 16; i++) kept.push(new ArrayBuffer(256 * 1024 * 1024));" \
    " return kept.length;"
TYPED_ARRAYS = "const kept = []; for (let i = 0; i < 16; i++) kept.push(new Float64Array(32 * 1024 * 1024));" \
    " return kept.length;"
LOCALE_PROBE = """return {
  number: (1234567.891).toLocaleString(),
  numberLocale: new Intl.NumberFormat().resolvedOptions().locale,
  collator: new Intl.Collator().resolvedOptions().locale,
  sorted: ["z", "\u00e4", "a", "B"].sort((x, y) => x.localeCompare(y)).join(""),
  plural: new Intl.PluralRules().select(1),
  list: typeof Intl.ListFormat === "function" ? new Intl.ListFormat().format(["a", "b", "c"]) : null,
  upper: "i".toLocaleUpperCase(),
};"""


@pytest.mark.parametrize("script", [ARRAY_BUFFERS, TYPED_ARRAYS])
def test_array_buffers_past_the_external_cap_fail_the_grader_and_the_next_run_is_fine(script):
    with JsSandbox() as sb:
        with pytest.raises(JsGraderError) as info:
            sb.evaluate(script, {})
        assert "Array buffer allocation failed" in str(info.value) or "out of memory" in str(info.value)
        assert sb.evaluate("return new ArrayBuffer(1024 * 1024).byteLength", {}) == 1024 * 1024


def test_a_lower_external_cap_is_honoured():
    script = "const kept = []; for (let i = 0; i < 8; i++) kept.push(new ArrayBuffer(128 * 1024 * 1024));" \
        " return kept.length;"
    with JsSandbox(external_limit_bytes=2048 * 1024 * 1024) as roomy:
        assert roomy.evaluate(script, {}) == 8
    with JsSandbox(heap_limit_bytes=64 * 1024 * 1024, external_limit_bytes=64 * 1024 * 1024) as tight:
        with pytest.raises(JsGraderError):
            tight.evaluate(script, {})


def _locale_output() -> object:
    with JsSandbox() as sb:
        return sb.evaluate(LOCALE_PROBE, {})


def test_locale_and_time_zone_of_the_host_do_not_reach_graders(monkeypatch):
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("TZ", "UTC")
    reference = _locale_output()
    for lang, tz in (("de_DE.UTF-8", "Asia/Tokyo"), ("fr_FR.UTF-8", "America/St_Johns"), ("tr_TR.UTF-8", "UTC")):
        monkeypatch.setenv("LANG", lang)
        monkeypatch.setenv("LC_ALL", lang)
        monkeypatch.setenv("TZ", tz)
        assert _locale_output() == reference, lang
    assert reference == {"number": "1,234,567.891", "numberLocale": "en-US", "collator": "en-US",
                         "sorted": "a\u00e4Bz", "plural": "one", "list": "a, b, and c", "upper": "I"}


def test_a_helper_that_retained_memory_is_replaced_between_evaluations():
    heavy = "const a = []; for (let i = 0; i < 2e6; i++) a.push({ i }); return a.length"
    with JsSandbox(heap_limit_bytes=64 * 1024 * 1024) as sb:
        assert sb.evaluate("return 1", {}) == 1
        assert sb._client.restarts == 0
        assert sb.evaluate(heavy, {}) == 2_000_000  # the helper keeps what V8 committed for it
        assert sb.evaluate("return 2", {}) == 2  # a fresh helper answers, nothing is lost
        assert sb._client.restarts == 1
