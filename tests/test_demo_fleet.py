"""The demo fleet (examples/fleet) is what examples/make_fleet.py writes, byte for byte."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO
from tests.helpers.demo import make_fleet


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_committed_fleet_is_the_generators_output(tmp_path: Path) -> None:
    generator = make_fleet()
    generator.ROOT = tmp_path / "fleet"
    generator.main()
    committed, written = tree(REPO / "examples" / "fleet"), tree(tmp_path / "fleet")
    assert sorted(committed) == sorted(written), "rerun `python examples/make_fleet.py`"
    assert [p for p in committed if committed[p] != written[p]] == []


def test_the_planted_change_is_in_the_current_window() -> None:
    generator = make_fleet()
    days = sorted({*generator.DAYS, *generator.HISTORY_DAYS})
    # the regression window is the last 7 days; the change falls inside it, with days before it
    assert days[-7] < generator.CHANGE_DATE <= days[-1]
    assert generator.failure_rate("issue-triage", generator.CHANGE_DATE) > generator.failure_rate(
        "issue-triage", days[0])
    assert generator.failure_rate("ci-doctor", generator.CHANGE_DATE) == generator.failure_rate("ci-doctor", days[0])
