"""The one encoding of partition values in paths (graders.tables.paths.partition_value)."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import example, given, settings
from hypothesis import strategies as st

from graders.tables.parquet import encode_table
from graders.tables.paths import (
    HIVE_NULL,
    NAME_MAX,
    ORIGINAL_COLUMN,
    PART_NAME,
    decode_partition_value,
    is_hashed,
    keeps_original,
    parse_partition,
    partition_file,
    partition_path,
    partition_value,
    partition_values,
    stored_original,
)

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=400)


def _read_back(value: str) -> str | None:
    """What a reader sees: the path's value, or for a hashed one the value its files keep."""
    encoded = partition_value(value)
    return value if is_hashed(encoded) else decode_partition_value(encoded)


@settings(max_examples=400, deadline=None)
@given(st.lists(names, min_size=2, max_size=6, unique=True))
@example([HIVE_NULL, "%5F_HIVE_DEFAULT_PARTITION__", "a" * 246, "a" * 247])
@example(["x~" + "0" * 32, "x"])
@example([HIVE_NULL, partition_value(HIVE_NULL), "a" * 300, partition_value("a" * 300)])  # look-alikes
@example(["工" * 100, "工" * 101, "/", "%2F", "."])
def test_the_encoding_is_injective_fits_a_name_and_never_reads_as_null(values):
    encoded = [partition_value(v) for v in values]
    assert len(set(encoded)) == len(values)  # injective
    for value, enc in zip(values, encoded, strict=True):
        assert len(f"workflow={enc}".encode()) <= NAME_MAX
        assert "/" not in enc and "\0" not in enc
        assert enc != HIVE_NULL and decode_partition_value(enc) is not None
        assert _read_back(value) == value  # round-trips


@settings(max_examples=200, deadline=None)
@given(names)
def test_names_that_fit_keep_their_earlier_encoding(value):
    """Existing outputs keep their partitions: only names that did not fit, or read back as
    null, or look hashed, are encoded differently."""
    plain = quote(value, safe=" -_.~+@")
    if len(plain) <= NAME_MAX - len("workflow=") and plain != HIVE_NULL and not is_hashed(plain):
        assert partition_value(value) == plain


def test_null_is_hives_null_and_dates_fit_their_key():
    assert partition_value(None) == HIVE_NULL == partition_value("")
    assert partition_path("runs", None, "2026-05-01") == f"runs/workflow={HIVE_NULL}/date=2026-05-01"
    assert len(f"date={partition_value('d' * 400, 'date')}".encode()) <= NAME_MAX


def test_a_hashed_partition_keeps_its_name_in_its_file():
    name = "工作流程" * 40
    path = partition_path("dead_letter", name, "2026-05-01") + "/part-00000.parquet"
    row = {"input": "x", "run_id": "1", "stage": "prepare", "error_class": "E", "message": "m",
           "fleetgrade_version": "v"}
    data = encode_table("dead_letter", [row], name)
    assert stored_original(data) == name
    assert partition_values("out/" + path, data) == (name, "2026-05-01")
    plain = encode_table("dead_letter", [row], "short")
    assert stored_original(plain) is None and ORIGINAL_COLUMN.encode() not in plain
    assert plain == encode_table("dead_letter", [row])  # short names: files as before


tables = st.from_regex(r"_?[a-z][a-z_]{0,30}", fullmatch=True)
dates = st.none() | st.dates().map(lambda d: d.isoformat())


@settings(max_examples=200, deadline=None)
@given(tables, st.none() | st.just("") | names, dates, st.sampled_from(["", "out/", "gs://bucket/a=b/out/"]))
def test_a_partition_path_parses_back_to_its_table_and_values(table, workflow, date, prefix):
    """What the writer builds, every reader parses back: the table, the file, and the values
    (a hashed workflow's from the file it keeps the name in)."""
    rel = partition_file(table, workflow, date)
    parsed = parse_partition(prefix + rel)
    assert parsed is not None and (parsed.table, parsed.name) == (table, PART_NAME)
    assert f"{partition_path(table, workflow, date)}/{PART_NAME}" == rel
    row = {"input": "x", "run_id": "1", "stage": "prepare", "error_class": "E", "message": "m",
           "fleetgrade_version": "v"}
    data = encode_table("dead_letter", [row], workflow)
    assert partition_values(prefix + rel, lambda: data) == (workflow or None, date)
    assert parsed.hashed == keeps_original(workflow)


def test_paths_that_are_no_partition_parse_as_none():
    for path in ("", "runs", "out/runs/part-00000.parquet", "out/runs/date=x/workflow=y/f", "workflow=a/date=b/f"):
        assert parse_partition(path) is None
    assert partition_values("out/_state/part-00000.parquet") == (None, None)
