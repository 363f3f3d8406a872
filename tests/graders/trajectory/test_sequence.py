"""Entropy rate and LZ76: worked vectors and fast-vs-naive properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.trajectory import sequence
from tests.graders.trajectory import naive
from tests.graders.trajectory.helpers import events, ir_trace, run


@pytest.mark.parametrize(
    ("text", "phrases"),
    [("1010101010", 3), ("ABABCCCA", 4), ("AAAA", 2), ("1001111011000010", 6), ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 26)],
)
def test_lz76_vectors(text: str, phrases: int) -> None:
    assert sequence.lz76_complexity(list(text)) == phrases


def test_lz_grader_normalisation() -> None:
    result = run("lempel-ziv-trajectory-complexity", events("ABABCCCA"))
    assert result["value"] == pytest.approx(4 * math.log(8, 3) / 8, rel=1e-12)
    assert result["value"] == pytest.approx(0.9464, abs=5e-5)
    assert result["details"] == "events=8 alphabetSize=3 rawComplexity=4 upperBound=4.2266"


def test_entropy_vectors() -> None:
    assert sequence.conditional_entropy_bits(list("ABABCCCA")) == pytest.approx(0.679270, abs=1e-6)
    result = run("event-entropy-rate", events("ABABCCCA"))
    assert result["value"] == pytest.approx(0.4286, abs=5e-5)
    assert result["details"] == (
        "events=8 alphabetSize=3 rawEntropyBits=0.6793 maxEntropyBits=1.5850"
    )


def test_symbols_sort_by_index_and_qualify_tool_calls() -> None:
    trace = ir_trace(events=[
        {"index": 2, "kind": "tool_call", "ref": "b"},
        {"index": 0, "kind": "tool_call", "ref": "a"},
        {"kind": "message"},  # no finite index: sorts by its array position (2)
        {"index": 1, "kind": "tool_call", "ref": ""},
        {"index": 9, "kind": ""},
        "not a record",
    ])
    cands = [trace["trajectoryIR"]]
    from graders.families.trajectory.ir import event_symbols

    assert event_symbols(cands) == ["tool_call:a", "tool_call", "tool_call:b", "message"]


def test_single_symbol_and_too_few() -> None:
    assert run("event-entropy-rate", events("AAA"))["details"] == (
        "events=3 alphabetSize=1; entropy is vacuously 0 with a single symbol"
    )
    assert run("lempel-ziv-trajectory-complexity", events("A"))["message"] == "not applicable: fewer than two events"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from("ABC"), min_size=1, max_size=60))
def test_lz76_equals_kaspar_schuster_loop(seq: list[str]) -> None:
    assert sequence.lz76_complexity(seq) == naive.lz76(seq)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 40).map(str), min_size=1, max_size=80))
def test_lz76_with_many_symbols_equals_kaspar_schuster_loop(seq: list[str]) -> None:
    # Many first occurrences (one symbol per tool call in real IRs): the phrase bound matters.
    assert sequence.lz76_complexity(seq) == naive.lz76(seq)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("ABCDE"), min_size=2, max_size=60))
def test_entropy_equals_definition(seq: list[str]) -> None:
    assert sequence.conditional_entropy_bits(seq) == pytest.approx(naive.entropy_bits(seq), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("ABCDEFG"), min_size=2, max_size=80))
def test_entropy_is_the_reference_sum_bit_for_bit(seq: list[str]) -> None:
    # Bigrams are counted in C, but summed in the reference's Map order: the same float.
    assert sequence.conditional_entropy_bits(seq) == naive.entropy_bits_map_order(seq)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40).map(str), min_size=2, max_size=80))
def test_entropy_with_many_single_successor_symbols_is_the_reference_sum_bit_for_bit(seq: list[str]) -> None:
    assert sequence.conditional_entropy_bits(seq) == naive.entropy_bits_map_order(seq)
