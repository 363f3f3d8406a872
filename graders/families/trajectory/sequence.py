"""Event-sequence complexity: first-order entropy rate and Lempel–Ziv (LZ76) complexity.

Both run over the event symbols of ``ir.event_symbols`` (sorted by ``index``).

LZ76 follows the Kaspar–Schuster parsing the reference uses, but instead of its pointer loop
(O(n²) scalar steps) each phrase is found directly: the phrase starting at P extends the
longest prefix of s[P:] that also starts at some p < P (overlap allowed). That length is
monotone, so a galloping then binary search over C-speed ``str.find`` calls finds it, bounded
by the next first occurrence of a symbol (nothing before it can match it).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter
from typing import Final

from graders.families.trajectory.ir import Raw, Record, RunView, Trace, run_view, unavailable
from graders.grading.registry import GraderContext
from graders.jsrt.jscompat import js_to_fixed

_TOO_FEW: Final = "not applicable: fewer than two events"


def conditional_entropy_bits(sequence: list[str]) -> float:
    """H(X_t | X_{t−1}) in bits from the observed bigram counts (plug-in estimate)."""
    transitions = len(sequence) - 1
    totals = Counter(sequence[:transitions])  # transitions out of each symbol
    # Bigrams counted in C; a pair first seen later never precedes an earlier one, so rows
    # and their entries keep the first-seen order of the reference's Maps. A row with one
    # successor (count == total: every tool call's own symbol) adds exactly 0.0, to a sum that
    # is never -0.0, so it is left out: the sum is the reference's bit for bit.
    rows: dict[str, list[int]] = {}
    for (prev, _), count in Counter(itertools.pairwise(sequence)).items():
        if count != totals[prev]:
            row = rows.get(prev)
            if row is None:
                rows[prev] = [count]
            else:
                row.append(count)
    bits = 0.0
    # Summed in first-seen order, as the reference iterates its Maps.
    for prev, counts in rows.items():
        total = totals[prev]
        for count in counts:
            bits += count / transitions * math.log2(total / count)
    return bits


def _as_text(sequence: list[str]) -> tuple[str, list[int]]:
    """One character per distinct symbol, so substring search runs in C; and the positions
    where a symbol occurs for the first time, in order."""
    codes: dict[str, str] = {}
    firsts: list[int] = []
    chars: list[str] = []
    for i, symbol in enumerate(sequence):
        code = codes.get(symbol)
        if code is None:
            code = codes[symbol] = chr(len(codes))
            firsts.append(i)
        chars.append(code)
    return "".join(chars), firsts


def lz76_complexity(sequence: list[str]) -> int:
    """Kaspar–Schuster LZ76 phrase count; a trailing incomplete phrase counts as one."""
    n = len(sequence)
    if n == 0:
        return 0
    text, firsts = _as_text(sequence)
    complexity = 1
    prefix = 1
    while prefix < n:
        # Longest L such that text[prefix:prefix+L] starts somewhere before `prefix`. It stops
        # before the next first occurrence of a symbol (which cannot match anything earlier):
        # with many symbols (one per tool call) most phrases end there, without a failing
        # search over the whole prefix. Phrases are short, so gallop (1, 2, 4, ...) before bisecting.
        at = bisect.bisect_left(firsts, prefix)
        limit = min(n, firsts[at] if at < len(firsts) else n) - prefix
        lo, step = 0, 1
        while True:
            probe = min(limit, lo + step)
            if text.find(text[prefix : prefix + probe], 0, prefix + probe - 1) == -1:
                hi = probe - 1
                break
            lo = probe
            if lo == limit:
                hi = lo
                break
            step *= 2
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if text.find(text[prefix : prefix + mid], 0, prefix + mid - 1) != -1:
                lo = mid
            else:
                hi = mid - 1
        complexity += 1
        if lo == n - prefix:  # the phrase runs into the end of the sequence
            break
        prefix += lo + 1
    return complexity


def _alphabet(view: RunView) -> int:
    """Distinct event symbols (entropy rate and LZ76)."""
    size: int = view.derive("sequence.alphabet", lambda: len(set(view.symbols)))
    return size


def event_entropy_rate(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """Bigram conditional entropy normalised by log2(alphabet size), clamped to [0, 1]."""
    view = run_view(trace, ctx)
    seq = view.symbols
    n = len(seq)
    if n < 2:
        return unavailable(_TOO_FEW)
    alphabet = _alphabet(view)
    if alphabet < 2:
        return {"value": 0, "details": f"events={n} alphabetSize={alphabet}; entropy is vacuously 0 with a single symbol"}
    bits = conditional_entropy_bits(seq)
    max_bits = math.log2(alphabet)
    return {
        "value": max(0.0, min(1.0, bits / max_bits)),
        "details": (
            f"events={n} alphabetSize={alphabet} rawEntropyBits={js_to_fixed(bits, 4)} "
            f"maxEntropyBits={js_to_fixed(max_bits, 4)}"
        ),
    }


def lempel_ziv_trajectory_complexity(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """LZ76 phrases / (n / log_b n), clamped to [0, 1]."""
    view = run_view(trace, ctx)
    seq = view.symbols
    n = len(seq)
    if n < 2:
        return unavailable(_TOO_FEW)
    alphabet = _alphabet(view)
    if alphabet < 2:
        return {
            "value": 0,
            "details": f"events={n} alphabetSize={alphabet}; LZ76 complexity is vacuously 0 with a single repeated symbol",
        }
    complexity = lz76_complexity(seq)
    upper = n / (math.log(n) / math.log(alphabet))
    return {
        "value": max(0.0, min(1.0, complexity / upper)),
        "details": f"events={n} alphabetSize={alphabet} rawComplexity={complexity} upperBound={js_to_fixed(upper, 4)}",
    }
