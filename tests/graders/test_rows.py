"""One dead letter per (input, stage), whatever the order rows arrive in (the ``dead_letter`` spec's
``one_per_identity``, graders/tables/merge.py)."""

from __future__ import annotations

import random

from graders.tables.merge import one_per_identity
from schemas.tables import SPECS


def dead(input_path: str, stage: str, error_class: str, message: str) -> dict:
    return {"input": input_path, "stage": stage, "error_class": error_class, "message": message}


def test_one_dead_letter_per_input_and_stage_whatever_the_order():
    rows = [
        dead("wf/run-1", "grade", "ValueError", "b"),
        dead("wf/run-1", "grade", "KeyError", "z"),
        dead("wf/run-1", "grade", "ValueError", "a"),
        dead("wf/run-1", "prepare", "MetadataError", "m"),
        dead("wf/run-2", "grade", "ValueError", "c"),
    ]
    expected = [dead("wf/run-1", "grade", "KeyError", "z"), dead("wf/run-1", "prepare", "MetadataError", "m"),
                dead("wf/run-2", "grade", "ValueError", "c")]
    for seed in range(10):
        shuffled = list(rows)
        random.Random(seed).shuffle(shuffled)
        assert sorted(one_per_identity(SPECS["dead_letter"], shuffled), key=lambda r: (r["input"], r["stage"])) == expected
