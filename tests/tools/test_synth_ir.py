"""Synthetic fleets with heavy Trajectory IRs (the bench's ir-heavy tier)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import orjson

from tools.synth import MANIFEST, SizeMix, SynthOptions, synth_fleet

HEAVY = SynthOptions(runs=40, seed=3, mix=SizeMix(medium=0.4, large=0.0), ir_rate=0.5, ir_heavy=True)


def _irs(root: Path) -> list[dict]:
    found = []
    for path in sorted(root.rglob("agent_output.json")):
        try:
            doc = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            continue  # a malformed run
        ir = next((doc[k] for k in ("trajectoryIR", "trajectoryIr") if isinstance(doc, dict) and k in doc), None)
        if ir is not None:
            found.append(ir)
    return found


def test_heavy_irs_follow_the_runs_tail_and_revisit_states(tmp_path: Path) -> None:
    synth_fleet(tmp_path, HEAVY)
    irs = _irs(tmp_path)
    assert len(irs) >= 0.3 * HEAVY.runs
    sizes = sorted(len(ir["events"]) for ir in irs)
    assert sizes[-1] > 150 and sizes[-1] > 5 * sizes[len(sizes) // 2]  # heavy-tailed: far beyond 60 calls
    for ir in irs:  # within the 5,000-item cap, so the graders grade them
        assert all(len(v) <= 5000 for v in ir.values() if isinstance(v, list))
    revisits = Counter(s["id"] for ir in irs for s in ir["states"][1:])
    assert max(revisits.values()) > 10 and len(revisits) <= 12  # a few phases, entered again and again
    options = json.loads((tmp_path / MANIFEST).read_text())["options"]
    assert (options["ir_rate"], options["ir_heavy"]) == (0.5, True)


def test_default_options_are_not_recorded(tmp_path: Path) -> None:
    # Fleets generated before the IR options keep matching their manifests (bench fleet cache).
    synth_fleet(tmp_path, SynthOptions(runs=3, seed=1))
    options = json.loads((tmp_path / MANIFEST).read_text())["options"]
    assert "ir_rate" not in options and "ir_heavy" not in options
    assert all(len(ir["events"]) <= 3 * 60 + 10 for ir in _irs(tmp_path))
