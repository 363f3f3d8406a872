"""A run's artifact tree, independent of where it is stored.

Preprocessing sees a run as a listing (relative path -> size) and a way to open a file.
The local filesystem implementation lives here; an object store's (``gs://``) is
``graders/runs/storage.py``'s reader over a store the edge (``transforms/``) provides. Keeping
the grading core free of Beam lets the CLI, the tests and the pipeline share one preprocessing path.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import itertools
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import IO, Any, Final

from graders.jsrt.jsonio import MAX_FILE_SIZE, MAX_LINE_LENGTH, LineBatch
from graders.runs.download_layout import artifact_root_paths

# 64 KiB blocks keep a batch's parsed records in the CPU cache while they are used (1 MiB
# blocks were markedly slower in make bench).
READ_BLOCK = 1 << 16


# A run's reading budget (issue 28; docs/hostile-input.md): each file is capped (MAX_FILE_SIZE),
# and so is the whole run, so that no run folder (millions of files, thousands of big ones, reads
# that crawl) can hold a worker for ever. Checked between reads: no signal, no thread.
MAX_RUN_FILES = 100_000  # entries listed in one run folder
MAX_RUN_BYTES = 1 << 30  # bytes actually read from one run's files, in total
MAX_RUN_SECONDS = 300.0  # wall clock from the run listed to the end of its preprocessing
# Records kept from one run's files (JSONL lines of gh-aw's logs, tool calls and usage records of a
# session): what a run holds grows with these, not only with its bytes (a 19-byte tool_use block
# becomes a ~550-byte call), so both are bounded (docs/hostile-input.md, "Memory").
MAX_RUN_RECORDS = 1_000_000
# The clock the time budget is measured with (a test replaces it with a fake one).
clock: Callable[[], float] = time.monotonic


class FileTooLarge(ValueError):
    """More bytes were read from a file than any file may have."""


class RunOverBudget(ValueError):
    """A run folder holds more files, yields more bytes or takes longer to read than one run may."""


def _gib(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n} bytes"


def check_file_count(root: str, count: int) -> None:
    """Refuse a run folder listing more than ``MAX_RUN_FILES`` entries."""
    if count > MAX_RUN_FILES:
        raise RunOverBudget(f"{root}: run folder holds more than {MAX_RUN_FILES} files; not read")


def bounded_listing(root: str, listing: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """A run's listing as a list, refused once it passes ``MAX_RUN_FILES`` entries (before the
    rest of it is listed, or held)."""
    entries = list(itertools.islice(listing, MAX_RUN_FILES + 1))
    check_file_count(root, len(entries))
    return entries


class RunFiles:
    """Files of one run, addressed by POSIX paths relative to the run's artifact root.

    ``sizes`` is the run folder's listing; a `gh aw logs` download's files are addressed where the
    in-job grader had them (graders/runs/download_layout.py), and opened where they are listed.
    """

    def __init__(
        self,
        root: str,
        sizes: Mapping[str, int],
        opener: Callable[[str], AbstractContextManager[IO[bytes]]],
        warnings: list[str] | None = None,
        mtimes: Mapping[str, float] | None = None,
    ) -> None:
        self.root = root
        # Modification times (epoch seconds) where the listing gave them: the last resort for a
        # session file's date (graders/prepare_sessions.py), never for a run folder's.
        self.mtimes: Mapping[str, float] = mtimes or {}
        self.started = clock()  # the run's time budget counts from here
        check_file_count(root, len(sizes))
        # Artifact-root path -> listed path: the one place a download's layout is undone.
        self.listed = artifact_root_paths(sizes)
        self.sizes = {rel: sizes[src] for rel, src in self.listed.items()}
        self._opener = opener
        # Entries of the listing that are not read (``skipped_warnings``): the run's warnings.
        self.warnings = list(warnings or [])
        self.bytes_read = 0
        self.records = 0
        # SHA-256 of every file preprocessing consumed: the run's input digest is built from them.
        self.file_digests: dict[str, str] = {}
        # Bytes read from each file read whole (beside its digest): a streamed file's length.
        self.read_sizes: dict[str, int] = {}
        # Documents a reader parsed from the run's files, kept for the next reader that asks.
        self.parsed: dict[str, Any] = {}

    def exists(self, rel: str) -> bool:
        return rel in self.sizes

    def size(self, rel: str) -> int | None:
        return self.sizes.get(rel)

    def open(self, rel: str) -> AbstractContextManager[IO[bytes]]:
        return self._opener(self.listed.get(rel, rel))

    def held(self) -> AbstractContextManager[None]:
        """While in it, the run folder stays open for its files to be opened under (a local
        run's ``LocalOpener``; other openers have nothing to hold)."""
        hold = getattr(self._opener, "held", None)
        return hold() if callable(hold) else contextlib.nullcontext()

    def _over_limit(self, rel: str) -> FileTooLarge:
        return FileTooLarge(f"{self.display(rel)}: more than {MAX_FILE_SIZE} bytes read (listed as "
                            f"{self.sizes.get(rel)} bytes): it grew while read, or is no plain file")

    def check_time(self, rel: str | None = None) -> None:
        """Refuse the run once it has taken longer than ``MAX_RUN_SECONDS`` to read and prepare."""
        if clock() - self.started > MAX_RUN_SECONDS:
            where = f" (at {rel})" if rel else ""
            raise RunOverBudget(f"{self.root}: run folder took longer than {MAX_RUN_SECONDS:g} s "
                                f"to read and preprocess{where}; not graded")

    def charge(self, n: int, rel: str) -> None:
        """Count ``n`` more bytes read from ``rel`` against the run's budget, and the time so far."""
        self.bytes_read += n
        if self.bytes_read > MAX_RUN_BYTES:
            raise RunOverBudget(f"{self.root}: read more than {_gib(MAX_RUN_BYTES)} from the run "
                                f"folder (at {rel}); not graded")
        self.check_time(rel)

    def keep(self, n: int, rel: str) -> None:
        """Count ``n`` more records kept from ``rel`` against the run's ``MAX_RUN_RECORDS``."""
        self.records += n
        if self.records > MAX_RUN_RECORDS:
            raise RunOverBudget(f"{self.root}: more than {MAX_RUN_RECORDS} records (log lines, tool calls, "
                                f"usage records) kept from the run's files (at {rel}); not graded")

    def read(self, rel: str) -> bytes:
        # The limit holds on the bytes read, not the size listed: a file can grow, or be a device.
        # No more is read than the run's budget has left (plus one byte, to see it is passed).
        self.check_time(rel)
        cap = min(MAX_FILE_SIZE, max(0, MAX_RUN_BYTES - self.bytes_read)) + 1
        # A read of ``cap`` bytes allocates all of them first (~17 µs for 50 MiB, more than a
        # small file's open and read): ask for the listed size and one byte more, and only for
        # the rest, up to ``cap``, when the file holds more than was listed.
        first = min(cap, self.sizes.get(rel, 0) + 1)
        with self.open(rel) as fh:
            data = fh.read(first)
            if len(data) == first < cap:
                data += fh.read(cap - first)
        if len(data) > MAX_FILE_SIZE:
            raise self._over_limit(rel)
        self.charge(len(data), rel)
        self.file_digests[rel] = hashlib.sha256(data).hexdigest()
        self.read_sizes[rel] = len(data)
        return data

    def iter_lines(self, rel: str) -> Iterator[bytes]:
        """Stream a file's lines split on ``\\n`` (the separator gh-aw splits on)."""
        hasher = hashlib.sha256()
        read = 0
        with self.open(rel) as fh:
            while line := fh.readline(MAX_FILE_SIZE + 1 - read):
                read += len(line)
                if read > MAX_FILE_SIZE:
                    raise self._over_limit(rel)
                self.charge(len(line), rel)
                hasher.update(line)
                yield line
        self.file_digests[rel] = hasher.hexdigest()
        self.read_sizes[rel] = read

    def iter_line_batches(self, rel: str, block_size: int | None = None) -> Iterator[LineBatch]:
        """Stream a file as batches of lines split on ``\\n`` (without it), one batch per block.

        Same lines, bytes and digest as :meth:`iter_lines`, but one read, one hash update and
        one ``split`` per block instead of per line (per-line overhead showed in make bench).
        Memory stays bounded by the block size (plus the longest line).
        """
        block_size = block_size or READ_BLOCK
        hasher = hashlib.sha256()
        pending: list[bytes] = []  # the unfinished last line, possibly over several blocks
        read = 0
        with self.open(rel) as fh:
            while True:
                block = fh.read(block_size)
                if not block:
                    break
                read += len(block)
                if read > MAX_FILE_SIZE:  # so a line, too, is bounded by the bytes read
                    raise self._over_limit(rel)
                self.charge(len(block), rel)
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
        self.read_sizes[rel] = read

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
        return f"{self.root.rstrip('/')}/{self.listed.get(rel, rel)}"


# The kinds of a folder's entries, from the directory listing (a stat only where the
# filesystem does not give an entry's type).
DIR, LINK, FILE, OTHER = "d", "l", "f", "o"

# A listing's entry is (path relative to the listed folder, size, mtime seconds). An entry that
# is listed but never read has a negative size saying why (no file has a negative size): a run
# that holds one is graded with a warning naming it, and never reads it.
UNREADABLE_DIR = -1  # a folder that cannot be listed; its path ends with "/." (or is ".")
NOT_UTF8 = -2  # a file or folder whose name is not valid UTF-8 (shown with \x escapes)
SYMLINK = -3  # a symbolic link, to anything: links are never followed (race-free with O_NOFOLLOW)
SPECIAL = -4  # a FIFO, socket or device: reading one can block forever or never end
SKIPPED: Final = {
    UNREADABLE_DIR: "folder cannot be read; its files are not graded",
    NOT_UTF8: "name is not valid UTF-8; not read",
    SYMLINK: "symbolic link; not followed",
    SPECIAL: "not a regular file (FIFO, socket or device); not read",
}

Entry = tuple[str, int, float]


def _kind(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return LINK
        if entry.is_dir(follow_symlinks=False):
            return DIR
        return FILE if entry.is_file(follow_symlinks=False) else OTHER
    except OSError:  # its type needed a stat, which failed: gone, or unreadable
        return OTHER


def _listed(folder: str) -> list[str] | None:
    """A folder's entries by name, each as its name, a NUL and its kind (``split_entry``); None
    when the folder cannot be read.

    One short string per entry, not an ``os.DirEntry`` (~250 B each): discovery holds a folder's
    listing while it walks the folder's runs, and DirEntries made the peak grow with the fleet
    (docs/performance.md). NUL sorts before every character a name can hold, so these sort as
    the names do.
    """
    try:
        with os.scandir(folder) as listing:
            return sorted(entry_item(entry.name, _kind(entry)) for entry in listing)
    except (FileNotFoundError, NotADirectoryError):  # gone since it was seen: nothing to read
        return []
    except OSError:
        return None


def sorted_entries(folder: str) -> list[str]:
    """``_listed``, with none for a folder that cannot be read."""
    return _listed(folder) or []


def entry_item(name: str, kind: str) -> str:
    return f"{name}\0{kind}"


def split_entry(item: str) -> tuple[str, str]:
    """(name, kind) of a ``sorted_entries`` item."""
    return item[:-2], item[-1]


def utf8_name(name: str) -> bool:
    """Whether a name from the OS is valid UTF-8 (Python keeps other bytes as lone surrogates,
    which no Parquet string, JSON text or path given to Beam can hold)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(name: str) -> str:
    """A name from the OS as text: bytes that are not UTF-8 as ``\\xNN``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def walk_local(top: str) -> Iterator[Entry]:
    """Every regular file below ``top`` as (relative path, size, mtime), in path order (each
    folder's entries by name, a subfolder's files where its name comes), and every entry that
    is not read as a negative-size entry (``SKIPPED``).

    Iterative: folders nested thousands deep are input, not a reason to exhaust the stack.
    """
    stack: list[tuple[str, str, Iterator[str]]] = []
    items = _listed(top)
    if items is None:
        yield ".", UNREADABLE_DIR, 0.0
        return
    stack.append((top, "", iter(items)))
    while stack:
        folder, rel, it = stack[-1]
        item = next(it, None)
        if item is None:
            stack.pop()
            continue
        name, kind = item[:-2], item[-1]  # split_entry, inline: once per file of the fleet
        if not utf8_name(name):
            yield rel + shown_name(name) + ("/." if kind == DIR else ""), NOT_UTF8, 0.0
            continue
        path = f"{folder}/{name}"
        if kind == DIR:
            sub = _listed(path)
            if sub is None:
                yield f"{rel}{name}/.", UNREADABLE_DIR, 0.0
            else:
                stack.append((path, f"{rel}{name}/", iter(sub)))
            continue
        if kind == LINK:
            yield rel + name, SYMLINK, 0.0
            continue
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:  # gone since the folder was read
            continue
        if kind != FILE or not stat.S_ISREG(st.st_mode):
            yield rel + name, SPECIAL, 0.0
            continue
        yield rel + name, st.st_size, st.st_mtime


class NotReadable(OSError):
    """A listed file that is no regular file inside its run folder any more (a link, a FIFO)."""


_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO without a writer would block; the type is checked before any read.
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    """``struct open_how`` of Linux's openat2(2)."""

    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_SYS_OPENAT2: Final = 437  # the same number on every Linux architecture
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08


def _make_openat2() -> Callable[[int, bytes], int] | None:
    """openat2(dir_fd, path) with ``_FILE_FLAGS``, no symlink anywhere on the path and nothing
    outside ``dir_fd``: one system call where the folder-by-folder walk takes one per folder.
    Returns the file descriptor, or -1 on any failure. None where the kernel (or a seccomp
    filter) has no openat2: every file is then opened folder by folder."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    how = _OpenHow(_FILE_FLAGS, 0, _RESOLVE_NO_SYMLINKS | _RESOLVE_BENEATH)
    how_ref, how_size = ctypes.byref(how), ctypes.sizeof(how)

    def openat2(dir_fd: int, path: bytes) -> int:
        return int(syscall(_SYS_OPENAT2, dir_fd, path, how_ref, how_size))

    try:
        probe = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fd = openat2(probe, b".")
    finally:
        os.close(probe)
    if fd < 0:
        return None
    os.close(fd)
    return openat2


_openat2 = _make_openat2()


def open_regular(root: str, rel: str, root_fd: int | None = None) -> IO[bytes]:
    """Open ``root/rel`` for reading, following no symlink at or below ``root``, and only if
    it is a regular file; ``root_fd``: ``root`` already open (``LocalOpener.held``), else it is
    opened here.

    Each folder of ``rel`` is opened relative to the one before with ``O_NOFOLLOW``, so a folder
    replaced by a link after the listing cannot lead out of the run folder either. Where Linux
    has openat2, one call does the same (``_make_openat2``); when it fails, the walk folder by
    folder says why.
    """
    own = root_fd is None
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) if root_fd is None else root_fd
    if _openat2 is not None and "\0" not in rel:
        try:
            file_fd = _openat2(fd, os.fsencode(rel))
        except BaseException:
            if own:
                os.close(fd)
            raise
        if file_fd >= 0:
            if own:
                os.close(fd)
            return _regular_file(root, rel, file_fd)
    if not own:
        fd = os.dup(fd)  # the walk closes each folder it leaves: never the held one
    parts = rel.split("/")
    try:
        for part in parts[:-1]:
            try:
                sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise NotReadable(exc.errno, f"{root}/{rel}: a folder on its path is not a folder of the "
                                  "run (a symbolic link?); not followed") from exc
            os.close(fd)
            fd = sub
        try:
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            if os.path.islink(f"{root}/{rel}"):
                raise NotReadable(exc.errno, f"{root}/{rel}: is a symbolic link; not followed") from exc
            raise
    finally:
        os.close(fd)
    return _regular_file(root, rel, file_fd)


def _regular_file(root: str, rel: str, file_fd: int) -> IO[bytes]:
    """``file_fd`` as a file object, if it is a regular file (else closed, and refused)."""
    try:
        mode = os.fstat(file_fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotReadable(f"{root}/{rel}: not a regular file (FIFO, socket or device); not read")
        os.set_blocking(file_fd, True)
        return os.fdopen(file_fd, "rb")
    except BaseException:
        os.close(file_fd)
        raise


def local_run_files(root: str | os.PathLike[str]) -> RunFiles:
    """List a run folder on the local disk: regular files only, no link followed.

    Links, special files, unreadable folders and names that are not UTF-8 are not read; each is
    a warning of the run (``RunFiles.warnings``).
    """
    # Plain strings, not pathlib: a Path interns each part of every path it parses, and the
    # table of interned strings grew with the runs read (docs/performance.md).
    base = os.fspath(root)
    return local_listing_files(base, walk_local(base))


class LocalOpener:
    """``open_regular`` under one run folder; while ``held``, the folder is opened once (when
    its first file is) for every file instead of once per file."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._holding = False
        self._fd: int | None = None

    def __call__(self, rel: str) -> AbstractContextManager[IO[bytes]]:
        if self._holding and self._fd is None:
            self._fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return open_regular(self.root, rel, self._fd)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if self._holding:  # already held further up
            yield
            return
        self._holding = True
        try:
            yield
        finally:
            fd, self._fd, self._holding = self._fd, None, False
            if fd is not None:
                os.close(fd)


def local_listing_files(base: str, listing: Iterable[tuple[Any, ...]]) -> RunFiles:
    """A local run folder whose files (relative path, size[, mtime]) were listed."""
    listing = bounded_listing(base, listing)
    return RunFiles(base, listing_sizes(listing), LocalOpener(base), skipped_warnings(base, listing),
                    listing_mtimes(listing))


def listing_sizes(listing: Iterable[tuple[Any, ...]]) -> dict[str, int]:
    return {item[0]: item[1] for item in listing if item[1] >= 0}


def listing_mtimes(listing: Iterable[tuple[Any, ...]]) -> dict[str, float]:
    """The modification times a listing gives (its entries' third element, when there is one)."""
    return {item[0]: float(item[2]) for item in listing
            if len(item) > 2 and item[1] >= 0 and isinstance(item[2], (int, float)) and item[2] > 0}


def _leaves(root: str, rel: str) -> bool:
    """Whether a link in a local run folder points outside it (only said, never followed)."""
    if "://" in root:
        return False
    try:
        target = os.path.realpath(os.path.join(root, rel))
        return os.path.commonpath([target, os.path.realpath(root)]) != os.path.realpath(root)
    except (OSError, ValueError):
        return True


def skipped_warnings(root: str, listing: Iterable[tuple[Any, ...]]) -> list[str]:
    """The run's warnings for the entries of its listing that are not read."""
    out = []
    for item in listing:
        rel, size = item[0], item[1]
        if size >= 0:
            continue
        shown = "this folder" if rel == "." else rel[:-1] if rel.endswith("/.") else rel
        reason = SKIPPED.get(size, "not read")
        if size == SYMLINK and _leaves(root, rel):
            reason = "symbolic link to a place outside the run folder; not followed"
        out.append(f"{shown}: {reason}")
    return out


def memory_run_files(files: Mapping[str, bytes], root: str = "memory:") -> RunFiles:
    """An in-memory run, for tests and property checks."""
    import io

    data = dict(files)

    def opener(rel: str) -> AbstractContextManager[IO[bytes]]:
        return io.BytesIO(data[rel])

    return RunFiles(root, {k: len(v) for k, v in data.items()}, opener)
