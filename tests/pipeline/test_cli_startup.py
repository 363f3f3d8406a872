"""Fast start: listing or reading the commands imports no Apache Beam (issue 29)."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from pipeline import cli
from tests.conftest import REPO

RUN = REPO / "examples" / "fleet" / "ci-doctor" / "run-7100403"

PROBE = """
import sys
from pipeline.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stdout.flush()
print("BEAM" if "apache_beam" in sys.modules else "NO-BEAM", file=sys.stderr)
"""


def beam_loaded(*argv: str) -> bool:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert last in ("BEAM", "NO-BEAM"), proc.stderr
    return last == "BEAM"


@pytest.mark.parametrize("argv", [
    ["--help"], ["--version"],
    *([name, "--help"] for name, _, _ in cli.COMMANDS),
    ["preprocess", str(RUN)], ["grade", str(RUN), "--json"], ["trace", "--self-test"],
], ids=lambda argv: " ".join(a if "/" not in a else "RUN" for a in argv))
def test_no_beam_import(argv):
    assert not beam_loaded(*argv)


def test_the_probe_sees_beam_when_a_pipeline_command_loads_it():
    # --project is Beam's: telling it from a typo loads Beam's options; the window then fails.
    assert beam_loaded("run", "--input", str(RUN), "--output", "/nonexistent/out", "--project", "p",
                       "--since", "2026-12-01", "--until", "2026-11-01")


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
