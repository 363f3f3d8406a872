"""The working-set grader against its definition: cumulative / peak of the valid input_tokens."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.builtin import _safe_nonneg_int, working_set_rebuild_factor
from graders.jsrt.lazyjson import JsonLines

_values = st.lists(
    st.one_of(st.integers(0, 20_000), st.integers(-(2**60), 2**60), st.sampled_from([2**53 - 1, 2**53, -1, 0]),
              st.floats(), st.booleans(), st.none(), st.sampled_from(["12", ""])),
    max_size=30,
)


def reference(raw: list[Any]) -> float | None:
    valid = [n for n in map(_safe_nonneg_int, raw) if n is not None]
    peak = max(valid, default=0)
    if peak == 0:
        return None
    return max(1.0, float(sum(valid)) / float(peak))


@settings(max_examples=400, deadline=None)
@given(_values)
def test_working_set_matches_its_definition(raw: list[Any]) -> None:
    as_column = {"tokenUsageEntries": JsonLines([b"{}"] * len(raw), {"input_tokens": raw})}
    as_records = {"tokenUsageEntries": [{"input_tokens": v} for v in raw]}
    assert working_set_rebuild_factor(as_column, None) == reference(raw)  # type: ignore[arg-type]
    assert working_set_rebuild_factor(as_records, None) == reference(raw)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 20_000), st.integers(-(2**53 - 1), 2**53 - 1)), max_size=30))
def test_a_safe_int_column_is_summed_as_its_definition(raw: list[int]) -> None:
    from graders.jsrt.lazylist import SafeInts

    as_column = {"tokenUsageEntries": JsonLines([b"{}"] * len(raw), {"input_tokens": SafeInts(raw)})}
    assert working_set_rebuild_factor(as_column, None) == reference(raw)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 20_000), st.integers(-3, 3), st.sampled_from([2**53 - 1, 2**53]),
                          st.sampled_from(["12", "", "x"])), max_size=30))
def test_an_int_and_string_column_is_summed_as_its_definition(raw: list[Any]) -> None:
    as_column = {"tokenUsageEntries": JsonLines([b"{}"] * len(raw), {"input_tokens": raw})}
    assert working_set_rebuild_factor(as_column, None) == reference(raw)  # type: ignore[arg-type]
