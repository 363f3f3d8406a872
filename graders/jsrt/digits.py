"""Where an integer beyond 2**53 can be in JSON text: a run of 16 ASCII digits.

JavaScript reads such an integer as a double, orjson and msgspec exactly; text without such a
run parses the same in all three. Used by ``jsonio`` (per block) and ``lazyjson`` (per loaded
line); a module of its own, as ``jsonio`` imports ``lazyjson``.
"""

from __future__ import annotations

from typing import Final

import numpy as np

# The exact scan for a 16-digit run: bytes.translate + find, ~10x faster than a regex.
_DIGIT_MAP: Final = bytes(0x30 if 0x30 <= i <= 0x39 else 0x2E for i in range(256))
_DIGIT_RUN: Final = b"0" * 16
# 8 bytes at a time (SWAR): x = word ^ "00000000" has every byte <= 9 exactly when the word is
# 8 digits; then neither x nor x + 0x76.. sets a byte's high bit (and no byte carries).
_ZEROS: Final = np.uint64(0x3030303030303030)
_SIXES: Final = np.uint64(0x7676767676767676)
_HIGHS: Final = np.uint64(0x8080808080808080)
_NUMPY_FROM: Final = 4096


def has_long_digit_run(data: bytes | memoryview) -> bool:
    """Whether ``data`` holds 16 ASCII digits in a row (where an integer beyond 2**53 may be).

    Such a run covers a whole 8-byte-aligned word of digits; the words are tested with numpy
    first, several times faster than a byte-wise scan, and only a batch that has such a word
    (rare in logs) is scanned exactly. A memoryview (a block's lines, uncopied) is copied
    only for the exact scan.
    """
    if len(data) < _NUMPY_FROM:  # below this numpy's fixed cost (~5 µs) exceeds the scan
        return len(data) >= 16 and bytes(data).translate(_DIGIT_MAP).find(_DIGIT_RUN) >= 0
    n = len(data) // 8
    x = np.frombuffer(data, dtype="<u8", count=n) ^ _ZEROS
    if not (((x | (x + _SIXES)) & _HIGHS) == 0).any():
        return False
    return bytes(data).translate(_DIGIT_MAP).find(_DIGIT_RUN) >= 0
