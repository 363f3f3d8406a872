"""One TableSpec per table (schemas/tables.py): what the specs declare, and the rewrite rules
the sink takes from them (graders/tables/merge.py)."""

from __future__ import annotations

import importlib
from typing import Any

import pyarrow as pa
import pytest

from graders.tables.merge import partition_rows
from graders.tables.state import drops_for
from pipeline.bigquery import all_ddl
from schemas import tables
from schemas.tables import RUN_IDENTITY, SPECS, Replace, TableSpec

SCHEMA = pa.schema([("run_id", pa.string()), ("attempt", pa.int32()), ("key", pa.string()), ("value", pa.int64())])


def spec(name: str, replace: Replace, identity: tuple[str, ...] = (), **kw: Any) -> TableSpec:
    return TableSpec(name, SCHEMA, ("run_id", "attempt", "key"), replace, "tests.graders.test_table_specs:spec",
                     "a test's", identity=identity, **kw)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_spec_names_a_row_builder_that_exists(name: str) -> None:
    module, _, function = SPECS[name].builder.partition(":")
    assert callable(getattr(importlib.import_module(module), function)), SPECS[name].builder
    assert SPECS[name].description
    assert SPECS[name].name == name


def test_a_spec_says_what_its_readers_and_its_drops_see(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SPECS, "per_run", spec("per_run", Replace.RUN, RUN_IDENTITY))
    monkeypatch.setitem(SPECS, "_internal", spec("_internal", Replace.TABLE))
    assert "per_run" in tables.public_tables() and "_internal" not in tables.public_tables()
    assert "per_run" in tables.run_tables() and "_internal" not in tables.run_tables()
    previous = {"outcome": "graded", "workflow": "wf", "date": "2026-05-01", "run_id": "7", "attempt": 1}
    assert ("per_run", "wf", "2026-05-01", ("7", 1)) in drops_for(previous)
    ddl = all_ddl("gs://b/out", "ds")
    assert "`ds.per_run`" in ddl and "_internal" not in ddl


@pytest.mark.parametrize(("replace", "identity", "error"), [
    (Replace.ROW, (), "an identity"),
    (Replace.TABLE, ("key",), "an identity"),
    (Replace.RUN, ("key",), "identified by"),
    (Replace.ROW, ("nope",), "not in its schema"),
])
def test_a_spec_that_cannot_be_written_is_refused(replace: Replace, identity: tuple[str, ...], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        spec("bad", replace, identity)


def row(run: str, key: str, value: int) -> dict[str, Any]:
    return {"run_id": run, "attempt": 1, "key": key, "value": value}


STORED = [row("1", "a", 1), row("1", "b", 2), row("2", "a", 3)]


def test_a_run_table_replaces_a_regraded_runs_rows_and_keeps_the_others() -> None:
    new = [row("1", "c", 9)]
    got = partition_rows(spec("t", Replace.RUN, RUN_IDENTITY), new, STORED, drops=set())
    assert got == [row("2", "a", 3), row("1", "c", 9)]
    assert partition_rows(spec("t", Replace.RUN, RUN_IDENTITY), [], STORED, drops={("2", 1)}) == STORED[:2]


def test_a_row_table_replaces_rows_by_identity_and_keeps_one_new_row_each() -> None:
    table = spec("t", Replace.ROW, ("run_id", "key"), one_per_identity=("value",))
    new = [row("1", "a", 7), row("1", "a", 5), row("3", "z", 1)]
    got = partition_rows(table, new, STORED, drops={("2", "a")})
    assert got == [row("1", "b", 2), row("1", "a", 5), row("3", "z", 1)]


def test_a_whole_table_is_its_new_rows() -> None:
    assert partition_rows(spec("t", Replace.TABLE), [row("9", "x", 0)], STORED, drops={("1", 1)}) == [row("9", "x", 0)]
