"""bench/stats.py measures what it says on tiny sizes (the figures themselves come from `python -m bench`)."""

from __future__ import annotations

from bench import stats


def test_rows_on_tiny_sizes() -> None:
    rows = [*stats.null_rate(2), *stats.power(2, (3.0,)), *stats.coverage(5)]
    names = [r["name"] for r in rows]
    assert names[0].startswith("false-positive rate") and rows[0]["unit"] == "share"
    assert rows[1]["name"] == "power, 3 SD drop at 7 runs/day" and rows[1]["value"] == 1.0, "a 3 SD drop is always seen"
    assert rows[2]["unit"] == "days" and rows[2]["value"] <= 1.0
    assert all(0.0 <= r["value"] <= 1.0 for r in rows if r["unit"] == "share")
    assert names[-2:] == ["bootstrap interval coverage (tasks resampled)",
                          "clustered CLT interval coverage (mean ± 1.96 SE)"]
