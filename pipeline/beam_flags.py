"""Beam's own flags that ``run`` and ``regrade`` pass through (``--project``, ``--temp_location``, …).

Only flags that Beam's ``PipelineOptions`` define for the runners fleetgrade supports (direct,
direct-multiprocess, portable, Dataflow, Dask) pass; anything else is an unknown flag. Beam itself only
logs "Unparseable argument" for a flag it does not know and carries on, which once let a typo
(``--graders-dri``) grade a fleet with the default graders. Imported by ``run``/``regrade`` only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from pipeline.errors import UsageError

# Value-taking behaviour of a flag: 0 none, 1 exactly one, "?" an optional one, "*" any number.
Arity = int | str


def _option_classes() -> tuple[type, ...]:
    from apache_beam.options import pipeline_options as po

    # Options of the runners fleetgrade supports and of what every job uses (types, setup, GCS
    # for gs:// fleets); not those of Flink/Spark/Prism/Kafka runners, or of S3/Azure/HDFS.
    classes: tuple[type, ...] = (
        po.StandardOptions, po.TypeOptions, po.DirectOptions, po.GoogleCloudOptions, po.WorkerOptions,
        po.DebugOptions, po.ProfilingOptions, po.SetupOptions, po.PortableOptions, po.JobServerOptions,
        po.CrossLanguageOptions, po.TestOptions,
    )
    try:  # the dask runner's (--dask_client_address, …) where the optional dask extra is installed
        from apache_beam.runners.dask.dask_runner import DaskOptions
    except ImportError:
        return classes
    return (*classes, DaskOptions)


@functools.cache
def beam_flags() -> dict[str, Arity]:
    """Every option string those classes define, with how many values it takes."""
    from apache_beam.options.pipeline_options import _BeamArgumentParser

    parser = _BeamArgumentParser(allow_abbrev=False, add_help=False)
    for cls in _option_classes():
        cls._add_argparse_args(parser)  # type: ignore[attr-defined]
    flags: dict[str, Arity] = {}
    for action in parser._actions:
        nargs = action.nargs
        arity: Arity = 1 if nargs is None else nargs if isinstance(nargs, (int, str)) else 1
        for option in action.option_strings:
            flags[option] = arity
    return flags


def beam_option_strings() -> list[str]:
    return sorted(beam_flags())


def split_beam_flags(argv: Sequence[str], ours: Iterable[str]) -> tuple[list[str], list[str]]:
    """``argv`` → (our tokens, Beam's tokens): each Beam flag with its value(s) moves to the second.

    A flag both define (``--runner``) stays ours. Values are taken as Beam's parser would take them.
    """
    known = beam_flags()
    mine = set(ours)
    kept: list[str] = []
    beam: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            kept.extend(argv[i:])
            break
        name, eq, _ = token.partition("=")
        if not token.startswith("--") or name in mine or name not in known:
            kept.append(token)
            i += 1
            continue
        beam.append(token)
        i += 1
        arity = known[name]
        if eq or arity == 0:
            continue
        # How many of the next tokens are this flag's values: argparse never takes a flag as one.
        limit = arity if isinstance(arity, int) else 1 if arity == "?" else len(argv)
        while limit and i < len(argv) and not argv[i].startswith("--"):
            beam.append(argv[i])
            i += 1
            limit -= 1
    return kept, beam


def parse_check(beam_tokens: list[str]) -> None:
    """Let Beam's parser read the pass-through flags, so a bad value fails before any work."""
    from apache_beam.options.pipeline_options import _BeamArgumentParser

    class Strict(_BeamArgumentParser):  # type: ignore[misc]
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(message)

    parser = Strict(allow_abbrev=False, add_help=False)
    for cls in _option_classes():
        cls._add_argparse_args(parser)  # type: ignore[attr-defined]
    parser.parse_known_args(beam_tokens)
