"""What a report covers: the tables present and the --since/--until/--workflow selection, as DuckDB views.

Each present table ``t`` gets a view ``v_t`` restricted to the selection, so every query in
``queries.py`` reads the same rows. The selection is written as SQL literals (not bound
parameters) because a view cannot hold parameters, and constant filters on ``workflow`` and
``date`` let DuckDB prune hive partitions; the literals come from validated dates and quoted
strings only.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import duckdb

from pipeline.tables import connect


@dataclass(frozen=True)
class Selection:
    since: dt.date | None = None
    until: dt.date | None = None
    workflows: tuple[str, ...] = field(default_factory=tuple)

    def where(self) -> str:
        """A WHERE clause; undated rows (dead letters without a date) stay in every date range."""
        conds: list[str] = []
        if self.since:
            conds.append(f"(date IS NULL OR date >= {date_literal(self.since)})")
        if self.until:
            conds.append(f"(date IS NULL OR date <= {date_literal(self.until)})")
        if self.workflows:
            conds.append(f"workflow IN ({', '.join(str_literal(w) for w in sorted(set(self.workflows)))})")
        return ("WHERE " + " AND ".join(conds)) if conds else ""

    def describe(self) -> str:
        parts = []
        if self.since or self.until:
            parts.append(f"dates {self.since or '…'} to {self.until or '…'}")
        if self.workflows:
            parts.append("workflows " + ", ".join(sorted(set(self.workflows))))
        return "; ".join(parts) or "all data"


def str_literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def date_literal(d: dt.date) -> str:
    return f"DATE '{d.isoformat()}'"


def open_scope(output: str, sel: Selection) -> tuple[duckdb.DuckDBPyConnection, frozenset[str]]:
    """A connection with a ``v_<table>`` view per present table (every public table of
    ``schemas.tables.SPECS`` that holds a partition), and the set of present tables."""
    con = connect(output)
    have = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    for table in sorted(have):
        con.execute(f"CREATE TEMP VIEW v_{table} AS SELECT * FROM {table} {sel.where()}")
    return con, frozenset(have)
