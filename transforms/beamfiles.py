"""Run files through Beam ``FileSystems``: one code path for local folders and ``gs://``."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import IO, Any, cast

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from graders.runs.runfiles import (
    RunFiles,
    bounded_listing,
    listing_mtimes,
    listing_sizes,
    local_listing_files,
    skipped_warnings,
)
from transforms.gcs import use_emulator_if_configured

# Workers import this module when they unpickle a DoFn, so the hook reaches every process.
use_emulator_if_configured()


def join(base: str, rel: str) -> str:
    return base.rstrip("/") + "/" + rel if rel else base


def beam_run_files(root: str, listing: Iterable[tuple[Any, ...]]) -> RunFiles:
    """A run at ``root`` whose files (relative path, size[, mtime]) were listed by discovery.

    A local run is read as ``fleetgrade grade`` reads it: regular files only, no link followed
    (``open_regular``); an object store has neither links nor special files.
    """
    listing = bounded_listing(root, listing)
    if "://" not in root:
        return local_listing_files(root, listing)

    def opener(rel: str) -> AbstractContextManager[IO[bytes]]:
        fh = FileSystems.open(join(root, rel), compression_type=CompressionTypes.UNCOMPRESSED)
        return cast(AbstractContextManager[IO[bytes]], fh)

    return RunFiles(root, listing_sizes(listing), opener, skipped_warnings(root, listing), listing_mtimes(listing))


def read_if_exists(path: str) -> bytes | None:
    """A file's bytes, or None when there is no such file."""
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as fh:
        data: bytes = fh.read()
    return data
