"""A run's artifact tree, independent of where it is stored.

Preprocessing sees a run as a listing (relative path -> size) and a way to open a file.
The local filesystem implementation lives here; the Beam ``FileSystems`` one (local and
``gs://``) lives in ``transforms/``. Keeping the grading core free of Beam lets the CLI,
the tests and the pipeline share one preprocessing path.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import IO

from graders.jsonio import MAX_LINE_LENGTH, LineBatch

# 64 KiB blocks keep a batch's parsed records in the CPU cache while they are used (1 MiB
# blocks were markedly slower in make bench).
READ_BLOCK = 1 << 16


class RunFiles:
    """Files of one run, addressed by POSIX paths relative to the run root."""

    def __init__(
        self,
        root: str,
        sizes: Mapping[str, int],
        opener: Callable[[str], AbstractContextManager[IO[bytes]]],
    ) -> None:
        self.root = root
        self.sizes = dict(sizes)
        self._opener = opener
        self.bytes_read = 0
        # SHA-256 of every file preprocessing consumed: the run's input digest is built from them.
        self.file_digests: dict[str, str] = {}

    def exists(self, rel: str) -> bool:
        return rel in self.sizes

    def size(self, rel: str) -> int | None:
        return self.sizes.get(rel)

    def open(self, rel: str) -> AbstractContextManager[IO[bytes]]:
        return self._opener(rel)

    def read(self, rel: str) -> bytes:
        with self.open(rel) as fh:
            data = fh.read()
        self.bytes_read += len(data)
        self.file_digests[rel] = hashlib.sha256(data).hexdigest()
        return data

    def iter_lines(self, rel: str) -> Iterator[bytes]:
        """Stream a file's lines split on ``\\n`` (the separator gh-aw splits on)."""
        hasher = hashlib.sha256()
        with self.open(rel) as fh:
            for line in fh:
                self.bytes_read += len(line)
                hasher.update(line)
                yield line
        self.file_digests[rel] = hasher.hexdigest()

    def iter_line_batches(self, rel: str, block_size: int | None = None) -> Iterator[LineBatch]:
        """Stream a file as batches of lines split on ``\\n`` (without it), one batch per block.

        Same lines, bytes and digest as :meth:`iter_lines`, but one read, one hash update and
        one ``split`` per block instead of per line (per-line overhead showed in make bench).
        Memory stays bounded by the block size (plus the longest line).
        """
        block_size = block_size or READ_BLOCK
        hasher = hashlib.sha256()
        pending: list[bytes] = []  # the unfinished last line, possibly over several blocks
        with self.open(rel) as fh:
            while True:
                block = fh.read(block_size)
                if not block:
                    break
                self.bytes_read += len(block)
                hasher.update(block)
                if b"\n" not in block:
                    pending.append(block)
                    continue
                lines = block.split(b"\n")
                carried = bool(pending)
                if carried:
                    pending.append(lines[0])
                    lines[0] = b"".join(pending)
                last = lines.pop()
                pending = [last] if last else []
                # The screen's answers from the block's bytes (jsonio.LineBatch): they hold
                # this batch's lines, but for a head carried over from earlier blocks, which
                # is tested on its own; no other line can be longer than the block.
                body = memoryview(block)[: len(block) - len(last)]
                head = lines[0] if carried else b""
                if block_size <= MAX_LINE_LENGTH:
                    short = len(head.strip()) <= MAX_LINE_LENGTH
                else:
                    short = max(map(len, map(bytes.strip, lines))) <= MAX_LINE_LENGTH
                yield LineBatch(lines, (body, head), short)
        if pending:
            line = b"".join(pending)
            yield LineBatch([line], (line,), len(line.strip()) <= MAX_LINE_LENGTH)
        self.file_digests[rel] = hasher.hexdigest()

    def under(self, prefix: str) -> list[str]:
        """Relative paths below ``prefix`` (a folder), sorted."""
        p = prefix.rstrip("/") + "/"
        return sorted(k for k in self.sizes if k.startswith(p))

    def input_digest(self) -> str:
        """Digest of the run's listing and of the content of every file that was read."""
        h = hashlib.sha256()
        for rel in sorted(self.sizes):
            h.update(f"{rel}\0{self.sizes[rel]}\0{self.file_digests.get(rel, '')}\n".encode())
        return h.hexdigest()

    def display(self, rel: str) -> str:
        return f"{self.root.rstrip('/')}/{rel}"


# The kinds of a folder's entries, from the directory listing (a stat only where the
# filesystem does not give an entry's type).
DIR, LINK, FILE, OTHER = "d", "l", "f", "o"


def _kind(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return LINK
        if entry.is_dir(follow_symlinks=False):
            return DIR
        return FILE if entry.is_file(follow_symlinks=False) else OTHER
    except OSError:  # its type needed a stat, which failed: gone, or unreadable
        return OTHER


def sorted_entries(folder: str) -> list[str]:
    """A folder's entries by name, each as its name, a NUL and its kind (``split_entry``); none
    when the folder cannot be read (``os.walk`` skips it too).

    One short string per entry, not an ``os.DirEntry`` (~250 B each): discovery holds a folder's
    listing while it walks the folder's runs, and a 10k-run fleet's largest workflow folder
    held 0.87 MiB of them (2.6 MiB at 30k runs), so the peak grew with the fleet (make bench
    memory). NUL sorts before every character a name can hold, so these sort as the names do.
    """
    try:
        with os.scandir(folder) as listing:
            return sorted(entry_item(entry.name, _kind(entry)) for entry in listing)
    except OSError:
        return []


def entry_item(name: str, kind: str) -> str:
    return f"{name}\0{kind}"


def split_entry(item: str) -> tuple[str, str]:
    """(name, kind) of a ``sorted_entries`` item."""
    return item[:-2], item[-1]


def _scan(folder: str, prefix: str, sizes: dict[str, int]) -> None:
    # A module-level function, not a closure: a closure that calls itself is a reference cycle,
    # and each run's would keep its listing until the cyclic GC ran (workers run it rarely,
    # transforms.heap), ~1 KB a run in make bench memory.
    for item in sorted_entries(folder):
        name, kind = item[:-2], item[-1]  # split_entry, inline: ~10 entries a run
        if kind == DIR:
            _scan(f"{folder}/{name}", f"{prefix}{name}/", sizes)
        elif kind == FILE:  # symlinks (to files or folders) and special files are skipped
            sizes[prefix + name] = os.stat(f"{folder}/{name}", follow_symlinks=False).st_size


def local_run_files(root: str | os.PathLike[str]) -> RunFiles:
    """List a run folder on the local disk (symlinks are not followed out of the tree).

    Regular files only, found by ``os.scandir`` (one ``stat`` per file, the entry's type from
    the directory listing): a symlink, to a file or a folder, is skipped; so is an unreadable
    folder, as ``os.walk`` does.
    """
    # Plain strings, not pathlib: a Path interns each part of every path it parses, and the
    # table of interned strings grew with the runs read (3.7 MiB at 10k runs, make bench memory).
    base = os.fspath(root)
    sizes: dict[str, int] = {}
    _scan(base, "", sizes)

    def opener(rel: str) -> AbstractContextManager[IO[bytes]]:
        return open(os.path.join(base, rel), "rb")

    return RunFiles(base, sizes, opener)


def memory_run_files(files: Mapping[str, bytes], root: str = "memory:") -> RunFiles:
    """An in-memory run, for tests and property checks."""
    import io

    data = dict(files)

    def opener(rel: str) -> AbstractContextManager[IO[bytes]]:
        return io.BytesIO(data[rel])

    return RunFiles(root, {k: len(v) for k, v in data.items()}, opener)
