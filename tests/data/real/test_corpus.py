"""Keeps the corpus of real public samples honest.

Each format folder under tests/data/real/ carries a PROVENANCE.md that names every sample file it holds (as a
backticked path relative to the folder) and gives a redistributable licence for every sample; every JSON and
JSONL file parses; files stay small. A sample added without provenance, or a licence left out, fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REAL = Path(__file__).resolve().parent
# Licences that allow redistribution of the samples (the brief: MIT/Apache/BSD/CC only).
ALLOWED_LICENSE = re.compile(r"^- License: (MIT|Apache-2\.0|BSD-[23]-Clause|CC[- ](BY|0)[^\n]*)", re.MULTILINE)
MAX_FILE_BYTES = 150_000
MAX_TOTAL_BYTES = 3_000_000


def format_dirs() -> list[Path]:
    return sorted(p for p in REAL.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))


def sample_files(fmt: Path) -> list[Path]:
    return sorted(p for p in fmt.rglob("*") if p.is_file() and p.name != "PROVENANCE.md")


def data_files() -> list[Path]:
    return [p for fmt in format_dirs() for p in sample_files(fmt) if p.suffix in (".json", ".jsonl")]


def sections(provenance: str) -> dict[str, str]:
    """The `## <sample>` sections of a PROVENANCE.md, by sample name."""
    parts = re.split(r"^## +(\S+)[ \t]*$", provenance, flags=re.MULTILINE)
    return {name: body for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_corpus_has_format_folders() -> None:
    assert len(format_dirs()) >= 3


@pytest.mark.parametrize("fmt", format_dirs(), ids=lambda p: p.name)
def test_provenance_lists_every_sample_file(fmt: Path) -> None:
    provenance_path = fmt / "PROVENANCE.md"
    assert provenance_path.is_file(), f"{fmt.name}: no PROVENANCE.md"
    provenance = provenance_path.read_text(encoding="utf-8")
    listed = set(re.findall(r"`([^`\s]+)`", provenance))
    files = sample_files(fmt)
    assert files, f"{fmt.name}: no samples"
    for path in files:
        rel = path.relative_to(fmt).as_posix()
        assert rel in listed, f"{fmt.name}/PROVENANCE.md does not list `{rel}`"


@pytest.mark.parametrize("fmt", format_dirs(), ids=lambda p: p.name)
def test_every_sample_has_a_section_with_a_redistributable_license(fmt: Path) -> None:
    found = sections((fmt / "PROVENANCE.md").read_text(encoding="utf-8"))
    samples = sorted({p.relative_to(fmt).parts[0] for p in sample_files(fmt)})
    for sample in samples:
        assert sample in found, f"{fmt.name}/PROVENANCE.md has no '## {sample}' section"
        assert ALLOWED_LICENSE.search(found[sample]), f"{fmt.name}/{sample}: no redistributable '- License:' line"
        assert re.search(r"\b[0-9a-f]{40}\b", found[sample]), f"{fmt.name}/{sample}: no 40-hex commit"


@pytest.mark.parametrize("path", data_files(), ids=lambda p: p.relative_to(REAL).as_posix())
def test_json_and_jsonl_parse(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        json.loads(text)
        return
    assert text.endswith("\n"), "a JSONL sample must end with a newline (whole records only)"
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                json.loads(line)
            except json.JSONDecodeError as err:
                raise AssertionError(f"{path.name}:{number}: {err}") from err


def test_samples_stay_small() -> None:
    files = [p for fmt in format_dirs() for p in sample_files(fmt)]
    too_big = [p.relative_to(REAL).as_posix() for p in files if p.stat().st_size > MAX_FILE_BYTES]
    assert not too_big, f"samples over {MAX_FILE_BYTES} bytes: {too_big}"
    assert sum(p.stat().st_size for p in files) < MAX_TOTAL_BYTES
