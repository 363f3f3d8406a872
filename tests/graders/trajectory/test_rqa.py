"""REP and RQA graders: worked vectors, fast-vs-naive properties, edge messages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.trajectory import rqa
from tests.graders.trajectory import naive
from tests.graders.trajectory.helpers import ir_trace, run, states

# (sequence, RR, DET, LAM, TT) under the gh-aw convention (LOI excluded, lmin = vmin = 2).
VECTORS = [
    ("AAAA", 1.0, 0.8333, 0.8333, 2.5),
    ("ABABCCCA", 0.25, 0.5714, 0.2857, 2.0),
    ("ABCABCABC", 0.25, 1.0, 0.0, 0),
]


@pytest.mark.parametrize(("seq", "rr", "det", "lam", "tt"), VECTORS)
def test_field_notes_vectors(seq: str, rr: float, det: float, lam: float, tt: float) -> None:
    trace = states(seq)
    assert run("recurrence-rate", trace)["value"] == pytest.approx(rr, abs=5e-5)
    assert run("recurrence-determinism", trace)["value"] == pytest.approx(det, abs=5e-5)
    assert run("recurrence-laminarity", trace)["value"] == pytest.approx(lam, abs=5e-5)
    assert run("recurrence-trapping-time", trace)["value"] == pytest.approx(tt, abs=5e-5)


def test_details_match_reference_format() -> None:
    trace = states("ABABCCCA")
    assert run("recurrence-determinism", trace)["details"] == (
        "visits=8 recurrentPoints=14 diagonalPoints=8 lmin=2; longest diagonal lines: 2, 2"
    )
    assert run("recurrence-rate", trace)["details"] == (
        "visits=8 recurrentPoints=14 possiblePoints=56; repeated states (id:count): A:3, C:3, B:2"
    )
    assert run("recurrence-trapping-time", states("AAAA"))["details"] == (
        "visits=4 verticalLines=4 totalVerticalLength=10 vmin=2; longest vertical lines: 3, 3, 2, 2"
    )


def test_vacuous_and_not_applicable() -> None:
    assert run("recurrence-determinism", states("ABCD"))["details"].endswith("DET is vacuously 0")
    assert run("recurrence-laminarity", states("ABCD"))["value"] == 0
    tt = run("recurrence-trapping-time", states("ABAB"))
    assert tt["value"] == 0 and tt["details"].endswith("TT is vacuously 0")
    assert run("recurrence-determinism", states("ABA"))["message"] == (
        "not applicable: fewer than four canonical state visits"
    )
    assert run("recurrence-rate", states("A"))["message"] == "not applicable: fewer than two canonical state visits"
    assert run("state-revisit-probability-rep", states("A"))["message"] == "not applicable: fewer than two state visits"


def test_state_ordering_mixes_positions_and_indexes() -> None:
    # s1 sorts by the position of event index 10 (0), s2 by its raw index 1, s3 by position 2.
    trace = ir_trace(
        events=[{"index": 10, "kind": "state_change"}],
        states=[{"id": "b", "firstEventIndex": 1}, {"id": "a", "firstEventIndex": 10}, "c", 5, {"id": ""}],
    )
    result = run("state-revisit-probability-rep", trace)
    assert result["details"] == "visited=3 distinct=3 revisits=0"
    # Number(null) is 0: the new visit ties with "a" (order 0) and the stable sort keeps it second.
    trace["trajectoryIR"]["states"].append({"id": "a", "firstEventIndex": None})
    assert run("state-revisit-probability-rep", trace)["details"] == (
        "visited=4 distinct=3 revisits=1; repeated states: a at event 0"
    )


sequences = st.lists(st.sampled_from("ABCD"), min_size=0, max_size=40)


@settings(max_examples=300, deadline=None)
@given(sequences)
def test_diagonal_stats_equal_naive(seq: list[str]) -> None:
    total, points, longs = naive.rqa_diagonal(seq)
    codes = rqa.symbol_codes(seq)
    pairs = total // 2
    # Both strategies (pair walk and bit-parallel diagonals) must agree with the plain walk.
    for stats in (rqa.diagonal_stats(seq), rqa._diagonal_stats_from_pairs(codes, pairs),
                  rqa._diagonal_stats_by_bit_planes(codes)):
        assert (stats.recurrent_points, stats.diagonal_points) == (total, points)
        assert stats.top_lines == sorted(longs, reverse=True)[:5]


@settings(max_examples=300, deadline=None)
@given(sequences)
def test_vertical_stats_equal_naive(seq: list[str]) -> None:
    total, longs = naive.rqa_vertical(seq)
    stats = rqa.vertical_stats(seq)
    assert stats.recurrent_points == total
    assert (stats.vertical_points, stats.line_count) == (sum(longs), len(longs))
    assert stats.top_lines == sorted(longs, reverse=True)[:5]


def test_dense_long_sequence() -> None:
    seq = list("AB" * 300 + "C" * 50)  # dense: takes the bit-parallel path
    total, points, longs = naive.rqa_diagonal(seq)
    stats = rqa.diagonal_stats(seq)
    assert (stats.recurrent_points, stats.diagonal_points) == (total, points)
    assert stats.top_lines == sorted(longs, reverse=True)[:5]
