"""Fast start: listing or reading the commands imports no Apache Beam (issue 29)."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

from pipeline import cli
from tests.conftest import REPO

RUN = REPO / "examples" / "fleet" / "ci-doctor" / "run-7100403"

# Runs each command line in turn in one interpreter and says, after each, whether Beam is loaded.
PROBE = """
import json, sys
from pipeline.cli import main
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
    sys.stdout.flush()
    print("BEAM" if "apache_beam" in sys.modules else "NO-BEAM", file=sys.stderr)
"""

LIGHT = [
    ["--help"], ["--version"],
    *([name, "--help"] for name, _, _ in cli.COMMANDS),
    ["preprocess", str(RUN)], ["grade", str(RUN), "--json"], ["trace", "--self-test"],
]


def beam_after_each(argvs: list[list[str]]) -> list[bool]:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argvs)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)
    marks = [ln for ln in proc.stderr.splitlines() if ln in ("BEAM", "NO-BEAM")]
    assert len(marks) == len(argvs), proc.stderr
    return [m == "BEAM" for m in marks]


def test_no_beam_import():
    """--help, --version, every command's --help, and grade/preprocess/trace at work load no Beam."""
    loaded = beam_after_each(LIGHT)
    assert not any(loaded), f"apache_beam first loaded by: fleetgrade {' '.join(LIGHT[loaded.index(True)])}"


def test_the_probe_sees_beam_when_a_pipeline_command_loads_it():
    # --project is Beam's: telling it from a typo loads Beam's options; the window then fails.
    assert beam_after_each([["run", "--input", str(RUN), "--output", "/nonexistent/out", "--project", "p",
                             "--since", "2026-12-01", "--until", "2026-11-01"]]) == [True]


def test_listed_help_matches_each_commands_own():
    """`fleetgrade --help` lists the commands from cli.COMMANDS without importing them."""
    for name, module, help_text in cli.COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(sub)
        action = next(a for a in sub._choices_actions if a.dest == name)
        assert action.help == help_text, name


def test_every_parser_refuses_abbreviations():
    for name, _, _ in cli.COMMANDS:
        parser = cli.build_parser(name)
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        assert not parser.allow_abbrev and not subparsers.choices[name].allow_abbrev, name
