"""Every document the code cites is in the repository (the specs it is compatible with are
copied under docs/reference/)."""

from __future__ import annotations

import re

from tests.conftest import REPO

# A section citation (a spec's name, then §N) or a path under docs/; other .md names in the code are
# workflow files of tests and examples.
CITED = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.md)`? *§|(?<![\w./-])(docs/[\w/-]+\.md)")
FOLDERS = ("schemas", "graders", "transforms", "pipeline", "bench", "tools", "tests")


def test_every_cited_document_exists():
    missing = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for cited in filter(None, (c for pair in CITED.findall(line) for c in pair)):
                    if not any((base / cited).is_file() for base in (REPO, REPO / "docs", path.parent)):
                        missing.append(f"{path.relative_to(REPO)}:{n}: {cited}")
    assert not missing, "\n".join(missing)


def test_the_reference_specs_say_where_they_come_from():
    for name in ("graders.md", "trace-grader.md"):
        first = (REPO / "docs" / "reference" / name).read_text(encoding="utf-8").splitlines()[0]
        assert "Copied verbatim" in first and name in first
