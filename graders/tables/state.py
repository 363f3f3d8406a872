"""Incremental backfill state: what graded each run, so a nightly run redoes only what changed.

One row per run folder, in its run's partition (``<output>/_state/workflow=…/date=…/``): the
run's listing digest (paths, sizes, modification times), the grading digest (the run's plan and
implementations, the trace rules, the fleetgrade version), and where its rows live. A run is
regraded when it is new, its listing changed, or its grading digest changed; its old rows are
then dropped by identity.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
import orjson

from graders.families.observed import observed_plan
from graders.families.trace_rules.config import TraceConfig
from graders.grading.plan import GradingPlan, PlanSet
from graders.tables.rows import implementation_digest
from schemas.tables import run_tables
from schemas.version import FLEETGRADE_VERSION

# A stored row to remove when a partition is rewritten: (table, workflow, date, identity).
Drop = tuple[str, str | None, str | None, tuple[Any, ...]]
TOUCH: tuple[Any, ...] = ()  # the identity of no row: a drop that only has the sink visit a partition


def touch(table: str, workflow: str | None, date: str | None) -> Drop:
    """A drop that removes nothing but has the sink rewrite the partition: a reader that found
    it damaged (graders/tables/parquet.DamagedOutput) hands it to the sink, which rewrites it
    from this job's rows and has the runs it held regraded (transforms/sink.py)."""
    return table, workflow, date, TOUCH


def listing_digest(listing: Iterable[tuple[Any, ...]]) -> str:
    h = hashlib.sha256()
    for item in sorted(listing):
        h.update(orjson.dumps(list(item)))
        h.update(b"\n")
    return h.hexdigest()


def listing_fingerprint(digest: str) -> bytes:
    """The first 8 bytes of a listing digest: enough to tell whether a folder changed between
    two listings of one job (a 2**-64 chance of missing a change), at an eighth of its size."""
    return bytes.fromhex(digest[:16])


def _config_json(cfg: TraceConfig) -> Any:
    raw = dataclasses.asdict(cfg)
    return {k: sorted(v) if isinstance(v, (set, frozenset)) else v for k, v in sorted(raw.items())}


def grading_digest(plan: GradingPlan, trace_config: TraceConfig, archived_evaluators: bool = True) -> str:
    """Everything besides the inputs that decides a run's rows.

    A run's own archived evaluator is part of its input listing, not of this digest.
    """
    observed = observed_plan()
    doc = {
        "archived_evaluators": archived_evaluators,
        # The observed family is graded on every run beside the plan (graders/families/observed.py).
        "observed": [observed.manifest(), [implementation_digest(e) for e in observed.entries]],
        "manifest": plan.manifest(),
        "implementations": [implementation_digest(e) for e in plan.entries],
        "trace_rules": _config_json(trace_config),
        "fleetgrade": FLEETGRADE_VERSION,
    }
    return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS, default=list)).hexdigest()


class GradingDigests:
    """The grading digest of every workflow's plan, computed once (not once per run)."""

    def __init__(self, plans: PlanSet, trace_config: TraceConfig) -> None:
        archived = plans.archived_evaluators
        self._by_workflow = {w: grading_digest(p, trace_config, archived) for w, p in plans.by_workflow}
        self._default = grading_digest(plans.default, trace_config, archived)

    def for_workflow(self, workflow: str | None) -> str:
        return self._by_workflow.get(workflow or "", self._default)


def graded_state(root: str, listing: str, grading: str, workflow: str, date: str, run_id: str,
                 attempt: int) -> dict[str, Any]:
    return {"root": root, "listing_digest": listing, "grading_digest": grading, "outcome": "graded",
            "workflow": workflow, "date": date, "run_id": run_id, "attempt": attempt,
            "fleetgrade_version": FLEETGRADE_VERSION}


def dead_state(root: str, listing: str, grading: str, workflow: str | None, date: str | None,
               outcome: str = "dead") -> dict[str, Any]:
    """``outcome`` "duplicate": a dead letter for its identity, which every job decides again."""
    return {"root": root, "listing_digest": listing, "grading_digest": grading, "outcome": outcome,
            "workflow": workflow, "date": date, "run_id": None, "attempt": None,
            "fleetgrade_version": FLEETGRADE_VERSION}


def drops_for(previous: dict[str, Any] | None) -> list[Drop]:
    """The rows a regraded run had: (table, workflow, date, identity) to drop before writing anew
    (every table whose spec replaces by run, schemas/tables.py)."""
    if not previous:
        return []
    w, d = previous.get("workflow"), previous.get("date")
    if previous.get("outcome") == "graded":
        ident = (previous.get("run_id"), previous.get("attempt"))
        return [(t, w, d, ident) for t in run_tables()]
    # A folder dead-lettered when read, or as a second folder of one run (transforms/duplicates.py).
    return [("dead_letter", w, d, (previous.get("root"), stage)) for stage in ("prepare", "duplicate")]


def unchanged(previous: dict[str, Any] | None, listing: str, grading: str) -> bool:
    """Whether an input may keep its rows: its listing and grading are those recorded, and it is
    no dead letter for its identity (decided again by each job: its rival may be gone)."""
    if not previous or previous.get("outcome") == "duplicate":
        return False
    return bool(previous.get("listing_digest") == listing and previous.get("grading_digest") == grading)


class _Stored(msgspec.Struct, array_like=True, gc=False):
    """A ``_state`` row without its root, the two digests as raw bytes where they are hex."""

    listing_digest: Any  # bytes, str or None (msgpack keeps bin and str apart)
    grading_digest: Any
    outcome: str | None
    workflow: str | None
    date: str | None
    run_id: str | None
    attempt: int | None
    fleetgrade_version: str | None


_STORED_FIELDS = _Stored.__struct_fields__
_DIGEST_FIELDS = frozenset({"listing_digest", "grading_digest"})
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Stored)


def _pack_digest(value: Any) -> Any:
    return bytes.fromhex(value) if isinstance(value, str) and _HEX_DIGEST.fullmatch(value) else value


def _unpack_digest(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


class StoredState:
    """The stored ``_state`` rows by run folder (its full path), held compactly.

    The discovery step holds the whole state while it lists the fleet: encoded, a row takes
    about a third of a dict's memory (docs/performance.md), so a million-run history fits a
    worker. Rows read back equal the rows stored.
    """

    def __init__(self, rows: Iterable[dict[str, Any]] = ()) -> None:
        self._rows: dict[str, bytes | list[bytes]] = {}
        self.workflows: set[str] = set()  # every workflow named: a hashed partition's name is one
        for row in rows:
            self.add(row)

    def add(self, row: dict[str, Any]) -> None:
        blob = _ENCODER.encode(_Stored(*(
            _pack_digest(row.get(f)) if f in _DIGEST_FIELDS else row.get(f) for f in _STORED_FIELDS)))
        root = row["root"]
        if row.get("workflow"):
            self.workflows.add(row["workflow"])
        held = self._rows.get(root)
        if held is None:
            self._rows[root] = blob
        elif isinstance(held, bytes):
            self._rows[root] = [held, blob]
        else:
            held.append(blob)

    def __len__(self) -> int:
        return len(self._rows)

    def pop(self, root: str) -> list[dict[str, Any]]:
        """The rows of ``root``, taken out (none when it has no state)."""
        held = self._rows.pop(root, None)
        return [] if held is None else _rows(root, held)

    def drain(self) -> Iterator[list[dict[str, Any]]]:
        """The rows of every folder not taken out yet, a folder at a time."""
        while self._rows:
            yield _rows(*self._rows.popitem())


def _rows(root: str, held: bytes | list[bytes]) -> list[dict[str, Any]]:
    return [_row(root, blob) for blob in ([held] if isinstance(held, bytes) else held)]


def _row(root: str, blob: bytes) -> dict[str, Any]:
    stored = _DECODER.decode(blob)
    row: dict[str, Any] = {"root": root}
    for f in _STORED_FIELDS:
        value = getattr(stored, f)
        row[f] = _unpack_digest(value) if f in _DIGEST_FIELDS else value
    return row
