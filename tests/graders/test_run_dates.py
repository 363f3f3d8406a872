"""A run's date becomes the ``date`` partition, which every reader types as DATE: only calendar dates."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graders.runs.runfiles import memory_run_files
from graders.runs.runmeta import MetadataError, determine_run_meta

# A run without aw_info.json: its identity comes from the path alone.
FILES = memory_run_files({"agent_output.json": b"{}"}, root="fleet/wf/x/run-5")


@given(st.dates(min_value=dt.date(1, 1, 1)), st.booleans())
def test_a_date_folder_names_the_run_date(day, hive_style):
    folder = ("date=" if hive_style else "") + day.isoformat()
    meta = determine_run_meta(FILES, f"wf/{folder}/run-5")
    assert (meta.workflow, meta.run_id, meta.date) == ("wf", "5", day.isoformat())


@given(st.integers(0, 9999), st.integers(0, 99), st.integers(0, 99))
def test_a_date_folder_that_is_no_calendar_date_is_a_dead_letter(year, month, day):
    text = f"{year:04d}-{month:02d}-{day:02d}"
    try:
        dt.date(year, month, day)
    except ValueError:
        with pytest.raises(MetadataError, match=f"the folder '{text}' in its path is not a real date"):
            determine_run_meta(FILES, f"wf/{text}/run-5")
    else:
        assert determine_run_meta(FILES, f"wf/{text}/run-5").date == text


def test_created_at_wins_over_the_folder_date():
    files = memory_run_files({"aw_info.json": b'{"created_at": "2026-11-30T23:30:00-02:00"}'}, root="r")
    assert determine_run_meta(files, "wf/2026-13-45/run-5").date == "2026-12-01"
