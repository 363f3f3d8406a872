"""Identity read from a run folder's path, and which files say an input is one run's folder."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from graders.runs.layout import ARTIFACT_NAMES, DATE_DIR, RUN_DIR
from graders.runs.storage import belongs_to_base as _belongs_to_base
from graders.single_run import path_hints

NAME = st.text(st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1, max_size=12).filter(
    lambda n: n not in (".", "..") and "\\\\" not in n)
PLAIN = NAME.filter(lambda n: not RUN_DIR.match(n) and not DATE_DIR.match(n) and not n.isdigit())
RUN_ID = st.from_regex(r"[0-9A-Za-z._-]{1,12}", fullmatch=True)
DATE = st.dates().map(lambda d: d.isoformat()).filter(lambda d: len(d) == 10)


@given(st.lists(NAME, max_size=4), PLAIN, RUN_ID, st.none() | DATE)
def test_a_run_folder_names_its_run_and_the_folder_above_its_workflow(above, workflow, run_id, date):
    path = "/".join(["", *above, workflow, *([date] if date else []), f"run-{run_id}"])
    assert path_hints(path) == (workflow, run_id, date)


@given(st.lists(NAME, max_size=5), PLAIN)
def test_a_folder_that_does_not_name_a_run_gives_no_run_id_nor_workflow(above, leaf):
    workflow, run_id, _ = path_hints("/".join(["", *above, leaf]))
    assert run_id is None and workflow is None


@given(st.sampled_from(sorted(ARTIFACT_NAMES)), st.lists(PLAIN, max_size=3), PLAIN)
def test_an_artifact_at_the_top_says_the_input_is_a_run(top, middle, leaf):
    assert _belongs_to_base("/".join([top, *middle, leaf])) is True


@given(st.lists(PLAIN, max_size=2), RUN_ID, st.sampled_from(sorted(ARTIFACT_NAMES)), PLAIN)
def test_a_file_of_a_run_folder_below_says_it_is_a_fleet(above, run_id, artifact, leaf):
    assert _belongs_to_base("/".join([*above, f"run-{run_id}", artifact, leaf])) is False
