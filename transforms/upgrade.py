"""An output written by an older fleetgrade, brought to the current column types before a job
touches it (README.md, "Changelog").

Table format 2 stores times as ``timestamp[us, UTC]``, dates as ``date32`` and counts and token
totals as int64, and says so in each file's footer (``graders.tables.parquet.TABLE_FORMAT``); the
first format stored times and dates as text, token totals as doubles and the ``observations``
attempt as int64. A job on a first-format output would leave the partitions it does not rewrite
in the old types, and one table would hold both. So, holding the output's lock, the launcher
rewrites every partition file of an older format (the same rows, re-encoded: the bytes a fresh
job writes), the ``_state`` files last and in order. The last ``_state`` file being current
therefore means the whole output is, and a current output costs one listing and one footer. A
job stopped half-way leaves each file whole, old or new, and the next job finishes the work.
"""

from __future__ import annotations

import logging

from apache_beam.io.filesystems import FileSystems

from graders.tables.parquet import TABLE_FORMAT, DamagedOutput, current_format, decode_table, encode_table
from graders.tables.paths import partition_values, table_globs
from schemas.state_table import STATE_TABLE
from schemas.tables import SPECS
from transforms.beamfiles import join
from transforms.incremental import read_stored

LOG = logging.getLogger("fleetgrade")


def _files(output: str, table: str) -> list[str]:
    found = []
    for pattern in table_globs(table):
        try:
            found += [m.path for r in FileSystems.match([join(output, pattern)]) for m in r.metadata_list]
        except Exception:  # no such folder: nothing of the table stored
            continue
    return sorted(found)


def _replace(path: str, data: bytes) -> None:
    """The file's new bytes, whole: written beside it (a name no reader globs), then moved over it."""
    tmp = path + ".upgrade"
    with FileSystems.create(tmp) as fh:
        fh.write(data)
    FileSystems.rename([tmp], [path])


def _read(path: str) -> bytes | None:
    """A partition file's bytes; None when absent or damaged (a FIFO is never opened)."""
    try:
        return read_stored(path)
    except DamagedOutput:
        return None


def upgrade_output(output: str) -> int:
    """Rewrites ``output``'s partition files of an older table format; the count rewritten."""
    state = _files(output, STATE_TABLE)
    last = _read(state[-1]) if state else None
    if last is not None and current_format(last):
        return 0
    rewritten = 0
    for table in [*(t for t in SPECS if t != STATE_TABLE), STATE_TABLE]:
        for path in state if table == STATE_TABLE else _files(output, table):
            data = _read(path)
            if data is None or current_format(data):
                continue
            try:
                rows = decode_table(table, data, path)
            except DamagedOutput:  # left as it is: the job that reads it back names it and rebuilds it
                continue
            workflow, _ = partition_values(path, data)
            _replace(path, encode_table(table, rows, workflow))
            rewritten += 1
    if rewritten:
        LOG.info("rewrote %d partition file(s) of %s in the current column types (table format %s)",
                 rewritten, output, TABLE_FORMAT.decode())
    return rewritten
