"""YAML from files we do not control: capped in bytes, nodes and depth, errors on one line.

PyYAML shares an aliased node instead of copying it, so a "billion laughs" document loads
quickly, but everything that then walks or copies the data (merging imports, validation, JSON)
expands it: nine levels of ten aliases are 10^9 nodes. :class:`BoundedLoaderMixin` computes the
*expanded* size and depth of the composed node graph (memoised per node, so the check itself is
linear) and refuses the document before anything is constructed. Recursive aliases are refused
too. Files are read up to a byte cap, never whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

MAX_YAML_BYTES: Final = 4 * 1024 * 1024
MAX_EXPANDED_NODES: Final = 200_000
MAX_DEPTH: Final = 100


class YamlLimitError(ValueError):
    """The document is larger, deeper or more aliased than a configuration can be."""


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_expansion(root: yaml.Node, max_nodes: int = MAX_EXPANDED_NODES, max_depth: int = MAX_DEPTH) -> None:
    """Refuse a node graph whose aliases expand past ``max_nodes`` or ``max_depth`` (iteratively)."""
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, height)
    open_nodes: set[int] = set()  # nodes whose subtree is being measured: the current path
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            kids = [done[id(c)] for c in _children(node)]
            size = 1 + sum(s for s, _ in kids)
            height = 1 + max((h for _, h in kids), default=0)
            open_nodes.discard(key)
            if size > max_nodes:
                raise YamlLimitError(f"aliases expand to more than {max_nodes} nodes")
            if height > max_depth:
                raise YamlLimitError(f"nested deeper than {max_depth} levels")
            done[key] = (size, height)
            continue
        if key in done:
            continue
        if key in open_nodes:
            mark = node.start_mark
            raise YamlLimitError(f"recursive alias at line {mark.line + 1}")
        if len(open_nodes) > max_depth:
            raise YamlLimitError(f"nested deeper than {max_depth} levels")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))


class BoundedLoaderMixin:
    """Put before a ``yaml.SafeLoader`` subclass: checks the composed document before construction."""

    def get_single_node(self) -> Any:
        node = super().get_single_node()  # type: ignore[misc]
        if node is not None:
            check_expansion(node)
        return node


class BoundedSafeLoader(BoundedLoaderMixin, yaml.SafeLoader):
    """``yaml.SafeLoader`` with the expansion and depth caps."""


def describe(exc: BaseException, line_offset: int = 0) -> str:
    """A YAML failure in one line, without echoing the document's text."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        return f"{what} (line {mark.line + 1 + line_offset}, column {mark.column + 1})" if mark else what
    if isinstance(exc, RecursionError):
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
    if isinstance(exc, OSError) and exc.strerror:  # the file is named by the caller, once
        return exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def load(text: str, loader: type[Any] = BoundedSafeLoader) -> Any:
    """``yaml.load`` with a bounded loader; raises YAMLError, YamlLimitError or RecursionError."""
    if len(text) > MAX_YAML_BYTES:
        raise YamlLimitError(f"larger than {MAX_YAML_BYTES} bytes")
    return yaml.load(text, Loader=loader)


def read_capped_text(path: Path, limit: int = MAX_YAML_BYTES) -> str:
    """The file's UTF-8 text, refusing files above ``limit`` bytes without reading them whole."""
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise YamlLimitError(f"larger than {limit} bytes")
    return data.decode("utf-8")
