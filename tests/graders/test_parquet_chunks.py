"""Chunk-by-chunk Parquet encoding (sorted in Arrow) writes the bytes of the all-rows encoding."""

import itertools
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.parquet import encode_chunks, encode_table
from schemas.tables import SORT_KEYS, TABLES


def _values(t: pa.DataType, nullable: bool) -> st.SearchStrategy:
    if pa.types.is_string(t):
        base = st.sampled_from(["", "a", "b", "é", "\U0001f600", "A", "run-10", "run-9"])
    elif pa.types.is_integer(t):
        base = st.integers(-3, 3)
    elif pa.types.is_floating(t):
        base = st.sampled_from([0.0, -1.5, 2.25, 1e300])
    elif pa.types.is_boolean(t):
        base = st.booleans()
    elif pa.types.is_timestamp(t):
        base = st.sampled_from([datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 12, 3, 9, 30, tzinfo=UTC)])
    elif pa.types.is_list(t):
        base = st.lists(_values(t.value_type, t.value_field.nullable), max_size=2)
    elif pa.types.is_struct(t):
        base = st.fixed_dictionaries({f.name: _values(f.type, f.nullable) for f in t})
    else:  # pragma: no cover - a new column type needs a strategy here
        raise AssertionError(f"no strategy for {t}")
    return st.none() | base if nullable else base


def _rows(table: str) -> st.SearchStrategy:
    schema = TABLES[table]
    return st.lists(st.fixed_dictionaries({f.name: _values(f.type, f.nullable) for f in schema}), max_size=12)


@pytest.mark.parametrize("table", sorted(TABLES))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_chunks_encode_to_the_same_bytes(table, data):
    rows = data.draw(_rows(table))
    cut = data.draw(st.lists(st.integers(0, len(rows)), max_size=3).map(sorted))
    bounds = [0, *cut, len(rows)]
    chunks = [rows[a:b] for a, b in itertools.pairwise(bounds)]
    assert encode_chunks(table, chunks) == (encode_table(table, rows), len(rows))
    assert SORT_KEYS[table]  # every table is written in a defined order
