"""Small HTML building blocks shared by the report sections. All text goes through ``esc``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

# Only a plain owner/name and a numeric id make a GitHub link; anything else is shown as text.
_REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
_RUN_ID = re.compile(r"[0-9]{1,20}")


def esc(v: Any) -> str:
    return escape("" if v is None else str(v), quote=True)


def run_url(repository: str | None, run_id: str | None) -> str | None:
    if repository and run_id and _REPO.fullmatch(repository) and _RUN_ID.fullmatch(run_id):
        return f"https://github.com/{repository}/actions/runs/{run_id}"
    return None


def run_ref(run_id: str | None, attempt: int | None, repository: str | None = None) -> str:
    """A run id (with its attempt when > 1), linked to GitHub Actions when the repository is known."""
    label = esc(run_id) + (f" <span class=\"muted\">#{int(attempt)}</span>" if attempt and attempt > 1 else "")
    url = run_url(repository, run_id)
    if url:
        return f'<a class="run-link" href="{esc(url)}" rel="noopener noreferrer">{label}</a>'
    return f'<span class="run-id">{label}</span>'


def table(headers: Sequence[str | tuple[str, str]], body: Iterable[str], cls: str = "") -> str:
    """A table; a header given as (text, 'num') is right-aligned. ``body`` holds complete <tr> rows."""
    ths = "".join(f'<th class="{h[1]}">{esc(h[0])}</th>' if isinstance(h, tuple) else f"<th>{esc(h)}</th>"
                  for h in headers)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{ths}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def td(v: Any, cls: str = "") -> str:
    return f'<td class="{cls}">{esc(v)}</td>' if cls else f"<td>{esc(v)}</td>"


def data_attrs(**kv: Any) -> str:
    """``data-*`` attributes; underscores become dashes."""
    return " ".join(f'data-{k.replace("_", "-")}="{esc(v)}"' for k, v in kv.items())


def section(sid: str, title: str, body: str, intro: str = "") -> str:
    lede = f'<p class="muted">{intro}</p>' if intro else ""
    return f'<section id="{esc(sid)}"><h2>{esc(title)}</h2>{lede}{body}</section>'


def no_data(table_name: str, present: bool) -> str:
    why = "no rows in the selection" if present else f"the {table_name} table is absent from this output"
    return f'<p class="nodata" data-nodata="{esc(table_name)}">No data: {esc(why)}.</p>'
