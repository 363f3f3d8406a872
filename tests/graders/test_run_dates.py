"""A run's date becomes the ``date`` partition, which every reader types as DATE: only calendar dates."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graders.runs.runfiles import memory_run_files
from graders.runs.runmeta import MetadataError, determine_run_meta

# A run without aw_info.json: its identity comes from the path alone.
FILES = memory_run_files({"agent_output.json": b"{}"}, root="fleet/wf/x/run-5")


FIRST, LAST = dt.date(1970, 1, 1), dt.date(2199, 12, 31)  # the run dates fleetgrade grades


@given(st.dates(min_value=FIRST, max_value=LAST), st.booleans())
def test_a_date_folder_names_the_run_date(day, hive_style):
    folder = ("date=" if hive_style else "") + day.isoformat()
    meta = determine_run_meta(FILES, f"wf/{folder}/run-5")
    assert (meta.workflow, meta.run_id, meta.date) == ("wf", "5", day.isoformat())


@given(st.integers(0, 9999), st.integers(0, 99), st.integers(0, 99))
def test_a_date_folder_that_is_no_run_date_is_a_dead_letter(year, month, day):
    text = f"{year:04d}-{month:02d}-{day:02d}"
    try:
        run_date = FIRST <= dt.date(year, month, day) <= LAST
    except ValueError:
        run_date = False
    if run_date:
        assert determine_run_meta(FILES, f"wf/{text}/run-5").date == text
    else:
        with pytest.raises(MetadataError, match=f"the folder '{text}' in its path is not a real date "
                           r"\(YYYY-MM-DD\) within the run dates fleetgrade grades \(1970-01-01 to 2199-12-31\)"):
            determine_run_meta(FILES, f"wf/{text}/run-5")


@given(st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
       st.sampled_from(["Z", "+14:00", "-12:00", ""]))
def test_created_at_is_a_run_date_or_a_dead_letter_naming_it(when, zone):
    text = when.isoformat() + zone
    files = memory_run_files({"aw_info.json": f'{{"created_at": "{text}"}}'.encode()}, root="r")
    day = dt.datetime.fromisoformat(text)
    day = (day.astimezone(dt.UTC) if day.tzinfo else day).date()
    if FIRST <= day <= LAST:
        assert determine_run_meta(files, "wf/run-5").date == day.isoformat()
    else:
        with pytest.raises(MetadataError, match=f"^r/aw_info.json: created_at '{re.escape(text)}' is dated "
                           f"{day.isoformat()}, outside the run dates fleetgrade grades"):
            determine_run_meta(files, "wf/run-5")


def test_created_at_wins_over_the_folder_date():
    files = memory_run_files({"aw_info.json": b'{"created_at": "2026-11-30T23:30:00-02:00"}'}, root="r")
    assert determine_run_meta(files, "wf/2026-13-45/run-5").date == "2026-12-01"
