"""The stored state, held compactly while discovery lists the fleet, reads back as stored."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.tables.state import StoredState, graded_state
from schemas.state_table import STATE_SCHEMA

_text = st.none() | st.text(max_size=12)
_digest = st.none() | st.text(max_size=70) | st.text("0123456789abcdef", min_size=64, max_size=64) | st.sampled_from(
    ["A" * 64, "0" * 63, "f" * 65, "é" * 64])
_row = st.fixed_dictionaries({
    "root": st.sampled_from(["gs://b/f/wf/run-1", "/fleet/wf/run-2", "/fleet/wf/run-3", "r"]),
    "listing_digest": _digest, "grading_digest": _digest, "outcome": st.sampled_from(["graded", "dead", None]),
    "workflow": _text, "date": _text, "run_id": _text, "attempt": st.none() | st.integers(-(2**31), 2**31 - 1),
    "fleetgrade_version": _text,
})


def _canonical(rows: list[dict[str, Any]]) -> str:
    return repr([sorted(r.items()) for r in rows])


@settings(max_examples=200, deadline=None)
@given(st.lists(_row, max_size=12), st.data())
def test_rows_read_back_as_stored(rows: list[dict[str, Any]], data: st.DataObject) -> None:
    stored = StoredState(rows)
    by_root: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_root.setdefault(row["root"], []).append(row)
    assert len(stored) == len(by_root)
    taken = data.draw(st.lists(st.sampled_from([*sorted(by_root), "missing"]), unique=True)) if rows else []
    for root in taken:
        got = stored.pop(root)
        assert got == by_root.pop(root, [])
        assert all(list(r) == STATE_SCHEMA.names for r in got)  # the schema's column order
        assert stored.pop(root) == []  # taken out once
    assert sorted(map(_canonical, stored.drain())) == sorted(map(_canonical, by_root.values()))
    assert len(stored) == 0


def test_hex_digests_are_held_as_bytes_and_read_back_as_hex() -> None:
    row = graded_state("/fleet/wf/run-1", "ab" * 32, "0f" * 32, "wf", "2026-12-01", "1", 2)
    stored = StoredState([row])
    assert len(stored._rows["/fleet/wf/run-1"]) < 120  # type: ignore[arg-type]  # not ~2x64 hex characters
    assert stored.pop("/fleet/wf/run-1") == [row]
