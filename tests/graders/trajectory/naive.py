"""Plain transcriptions of the reference definitions, used to check the fast implementations.

Each function follows the gh-aw JavaScript loop (docs/reference/graders.md §7) step for step, with no
cleverness, so that a property test can compare it with the production code.
"""

from __future__ import annotations

import itertools
import math


def rqa_diagonal(seq: list[str]) -> tuple[int, int, list[int]]:
    """(recurrent points, diagonal points, lengths of lines >= 2) walking every upper diagonal."""
    n = len(seq)
    total = 0
    lengths: list[int] = []
    for d in range(1, n):
        run = 0
        for i in range(n - d):
            if seq[i] == seq[i + d]:
                total += 2
                run += 1
            else:
                if run:
                    lengths.append(run)
                run = 0
        if run:
            lengths.append(run)
    longs = [x for x in lengths if x >= 2]
    return total, sum(2 * x for x in longs), longs


def rqa_vertical(seq: list[str]) -> tuple[int, list[int]]:
    """(recurrent points, lengths of vertical lines >= 2) scanning every column, i != j."""
    n = len(seq)
    total = 0
    lengths: list[int] = []
    for j in range(n):
        run = 0
        for i in range(n):
            if i != j and seq[i] == seq[j]:
                total += 1
                run += 1
            else:
                if run:
                    lengths.append(run)
                run = 0
        if run:
            lengths.append(run)
    return total, [x for x in lengths if x >= 2]


def lz76(seq: list[str]) -> int:
    """The Kaspar–Schuster pointer loop."""
    n = len(seq)
    complexity = prefix = sub = max_sub = 1
    pointer = 0
    while prefix + sub <= n:
        if seq[pointer + sub - 1] == seq[prefix + sub - 1]:
            sub += 1
        else:
            max_sub = max(sub, max_sub)
            pointer += 1
            if pointer == prefix:
                complexity += 1
                prefix += max_sub
                pointer = 0
                max_sub = 1
                sub = 1
            else:
                sub = 1
    if sub != 1:
        complexity += 1
    return complexity


def dtw(reference: list[str], path: list[str]) -> float:
    """The textbook DP with cost 0/1."""
    previous = [0.0] + [math.inf] * len(path)
    for r in reference:
        current = [math.inf]
        for j, q in enumerate(path, start=1):
            cost = 0 if r == q else 1
            current.append(cost + min(previous[j], current[j - 1], previous[j - 1]))
        previous = current
    return previous[-1]


def entropy_bits(seq: list[str]) -> float:
    """H(X_t | X_{t-1}) = Σ p(prev, curr) · log2(count(prev) / count(prev, curr))."""
    pairs: dict[tuple[str, str], int] = {}
    prev_counts: dict[str, int] = {}
    for a, b in itertools.pairwise(seq):
        pairs[(a, b)] = pairs.get((a, b), 0) + 1
        prev_counts[a] = prev_counts.get(a, 0) + 1
    t = len(seq) - 1
    return sum(c / t * math.log2(prev_counts[a] / c) for (a, _), c in pairs.items())


def has_root(start: str, roots: set[str], edges: list[tuple[str, str]]) -> bool:
    """The reference's per-output depth-first search backwards (to -> from) over the edges."""
    parents: dict[str, list[str]] = {}
    for src, dst in edges:
        parents.setdefault(dst, []).append(src)
    pending = [start]
    seen: set[str] = set()
    while pending:
        current = pending.pop()
        if current in roots:
            return True
        if current in seen:
            continue
        seen.add(current)
        pending.extend(parents.get(current, []))
    return False


def entropy_bits_map_order(seq: list[str]) -> float:
    """The reference's loop: nested Maps prev -> (curr -> count) filled in sequence order, then
    summed row by row in insertion order. Same float sum, step for step (bit-identical)."""
    rows: dict[str, dict[str, int]] = {}
    totals: dict[str, int] = {}
    for a, b in itertools.pairwise(seq):
        row = rows.setdefault(a, {})
        row[b] = row.get(b, 0) + 1
        totals[a] = totals.get(a, 0) + 1
    t = len(seq) - 1
    bits = 0.0
    for a, row in rows.items():
        for c in row.values():
            bits += c / t * math.log2(totals[a] / c)
    return bits


def state_visit_ids(states: list[object], events: list[object]) -> list[str]:
    """Canonical visit order as the reference computes it: a Map from Number(event.index) to the
    event's position, each state's sort key, then a stable sort (finite numbers only here)."""
    position: dict[float, int] = {}
    for i, e in enumerate(events):
        if isinstance(e, dict) and isinstance(e.get("index"), (int, float)) and not isinstance(e.get("index"), bool):
            if math.isfinite(e["index"]):
                position[e["index"]] = i
    keyed: list[tuple[float, str]] = []
    for i, s in enumerate(states):
        if isinstance(s, str):
            keyed.append((i, s))
        elif isinstance(s, dict) and isinstance(s.get("id"), str) and s["id"]:
            first = s.get("firstEventIndex")
            if isinstance(first, (int, float)) and not isinstance(first, bool) and math.isfinite(first):
                keyed.append((position.get(first, first), s["id"]))
            else:
                keyed.append((i, s["id"]))
    return [sid for _, sid in sorted(keyed, key=lambda k: k[0])]
