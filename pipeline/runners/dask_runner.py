"""``--runner dask``: Beam's own DaskRunner, with the fixes fleetgrade's graph needs.

Beam's runner (``apache_beam/runners/dask/``, 2.77) turns each primitive transform into dask.bag
operations. As shipped it cannot run fleetgrade; this module subclasses it and corrects, in the
order the graph meets them:

1. Impulse: no translation.
2. Tagged outputs: one bag per ParDo, holding every output mixed.
3. ``finish_bundle`` outputs: collected before ``finish_bundle`` runs, so dropped.
4. Side inputs: computed inside every consuming task (a nested compute that can deadlock).
5. Sinks: only the last-visited bag is computed; other branches are skipped silently.
6. GroupByKey: keeps its input's partition count, so nothing after it runs in parallel.
7. Metrics: ``NotImplementedError``.

Each fix says ``Upstream:`` what it corrects, so that it can be offered to Beam and dropped when
Beam's runner has it. Everything else (the transform overrides, ``Create``, ``Flatten``, the
options, the result) is Beam's. ``tests/pipeline/test_dask_runner.py`` holds one test per fix.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, cast

import apache_beam as beam
import dask
import dask.bag as db
import dask.distributed as ddist
from apache_beam import DoFn, pvalue
from apache_beam.internal import pickler
from apache_beam.metrics.execution import MetricsContainer, MetricUpdates
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.pipeline import AppliedPTransform, Pipeline, PipelineVisitor
from apache_beam.runners.common import DoFnContext, DoFnInvoker, DoFnSignature, Receiver, _OutputHandler
from apache_beam.runners.dask import dask_runner as upstream
from apache_beam.runners.dask import transform_evaluator as te
from apache_beam.runners.dask.overrides import dask_overrides
from apache_beam.runners.direct.direct_metrics import DirectMetrics
from apache_beam.runners.worker import statesampler
from apache_beam.transforms.sideinputs import SideInputMap
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.counters import CounterFactory
from apache_beam.utils.windowed_value import WindowedValue
from dask.delayed import Delayed, delayed

DaskOptions = upstream.DaskOptions
Tag = str | None
# Upstream's default Create partition size, given explicitly: left unset, Create logs a warning
# ("The new default partition size is 128 …") on every run.
DEFAULT_PARTITION_SIZE = 128


def local_cluster(workers: int | None = None) -> ddist.LocalCluster:
    """A cluster of worker processes on this machine, every listener on 127.0.0.1 (the scheduler,
    the workers and their HTTP servers, on ports of the system's choice: two runs at once do not
    meet on 8787). One thread a worker: grading is Python. Its workers log nothing: a task's error
    reaches the client as the job's, and a worker closing with the cluster logs tracebacks."""
    return ddist.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0",
                              silence_logs=logging.CRITICAL)


def starts_local_cluster(options: PipelineOptions) -> bool:
    """Whether the job runs on a cluster of its own on this machine (no scheduler given): its
    workers inherit the launcher's environment and terminal, as the local runners' do."""
    dask_options = options.view_as(DaskOptions)
    return not dask_options.address and not dask_options.scheduler_file


class ConsoleLog(ddist.WorkerPlugin):  # type: ignore[misc]
    """The local cluster's workers print fleetgrade's lines (a dead letter naming its file, the
    commit) on the launching terminal, as the local runners do.

    ``silence_logs`` quiets the one stream handler that dask's logging set-up shares between the
    loggers it configures, fleetgrade's (``DASK_LOGGING__FLEETGRADE``) among them; fleetgrade's
    logger gets a handler of its own, with the launcher's level and format.
    """

    def __init__(self) -> None:
        self.level = logging.getLogger("fleetgrade").getEffectiveLevel()
        self.formatter = next((h.formatter for h in logging.getLogger().handlers if h.formatter), None)

    def setup(self, worker: ddist.Worker) -> None:
        handler = logging.StreamHandler(sys.stderr)  # the launcher's: local workers inherit it
        handler.setFormatter(self.formatter)
        log = logging.getLogger("fleetgrade")
        log.handlers, log.propagate = [handler], False
        log.setLevel(self.level)


class DaskRunner(upstream.DaskRunner):
    """Beam's DaskRunner with the fixes above; ``run_pipeline`` replaces upstream's, which
    computed only the last bag (fix 5) and had no metrics (fix 7)."""

    def run_pipeline(self, pipeline: Pipeline, options: PipelineOptions) -> DaskResult:
        dask_options = options.view_as(DaskOptions).get_all_options(drop_default=True, current_only=True)
        bag_kwargs = DaskOptions._extract_bag_kwargs(dask_options)
        if not bag_kwargs:
            bag_kwargs["partition_size"] = DEFAULT_PARTITION_SIZE
        cluster = None
        if starts_local_cluster(options):
            # Upstream: ``Client()`` starts a LocalCluster whose dashboard listens on every interface.
            cluster = dask_options["address"] = local_cluster()
        client = ddist.Client(**dask_options)
        try:
            if cluster is not None:
                client.register_plugin(ConsoleLog())
            pipeline.replace_all(dask_overrides())
            threads = sum(client.nthreads().values()) or 1
            translation = Translation(bag_kwargs, spread=bag_kwargs.get("npartitions") or 2 * threads)
            pipeline.visit(translation)
            # Linear chains (a bundle, the getitems of its outputs, the bags over them) as one
            # task each: per-task scheduling was most of a small fleet's time.
            with dask.config.set({"optimization.fuse.delayed": True}):
                # Upstream: only the last-visited bag was computed, so other branches (a second
                # sink, an assert_that) never ran. Every bundle of every ParDo returns its
                # metrics, and all of them are gathered: every ParDo runs, read or not, and
                # nothing else comes back to the client.
                futures = client.compute(translation.metrics)
        except BaseException:
            _close(client, cluster)
            raise
        return DaskResult(client, futures, cluster)


class DaskResult(upstream.DaskRunnerResult):
    """Upstream's result, which also gathers the bundles' metrics and closes the client (and the
    local cluster it started) once the job has ended."""

    def __init__(self, client: ddist.Client, futures: Sequence[ddist.Future],
                 cluster: ddist.LocalCluster | None) -> None:
        super().__init__(client, futures)  # the bundles' metrics
        self.cluster = cluster
        self._metrics = DirectMetrics()

    def wait_until_finish(self, duration: int | None = None) -> str:
        try:
            state = super().wait_until_finish(duration)
            # Upstream: ``metrics()`` raises NotImplementedError. Each bundle returns its
            # container's updates; a retried task's result replaces its first attempt's, so
            # every update counts once, committed as on Beam's direct runner.
            for updates in self.client.gather(list(self.futures)):
                self._metrics.commit_physical(None, updates)
                self._metrics.commit_logical(None, updates)
            return state
        finally:
            _close(self.client, self.cluster)

    def metrics(self) -> DirectMetrics:
        return self._metrics


def _close(client: ddist.Client, cluster: ddist.LocalCluster | None) -> None:
    client.close()
    if cluster is not None:
        cluster.close()


class Translation(PipelineVisitor):
    """The pipeline as dask collections: one bag per PCollection, and every bundle's metrics.

    Upstream: bags were kept per transform, so every consumer of a multi-output ParDo received
    its main and tagged outputs mixed (``'tuple' object has no attribute 'get'``).
    """

    def __init__(self, bag_kwargs: dict[str, Any], spread: int) -> None:
        self.bag_kwargs = bag_kwargs
        self.spread = spread
        self.bags: dict[pvalue.PValue, db.Bag] = {}
        self.metrics: list[Delayed] = []

    def visit_transform(self, node: AppliedPTransform) -> None:
        inputs = [pc for pc in node.inputs if not isinstance(pc, pvalue.PBegin)]
        sides = [si.pvalue for si in node.side_inputs]
        bags = [self.bags[pc] for pc in inputs]
        op_class = TRANSLATIONS.get(type(node.transform), te.NoOp)
        outputs: dict[Any, db.Bag]
        if op_class is ParDo:
            tagged, metrics = ParDo(node).outputs(bags[0], [side_values(self.bags[pc]) for pc in sides])
            outputs = dict(tagged)
            self.metrics.extend(metrics)
        else:
            op = op_class(node, bag_kwargs=self.bag_kwargs)
            if isinstance(op, (GroupByKey, Flatten)):
                op.spread = self.spread
            bag = op.apply(bags if isinstance(op, Flatten) else bags[0] if bags else None)
            if bag is None:
                raise NotImplementedError(f"the dask runner cannot run {node.full_label} "
                                          f"({type(node.transform).__name__}): it has no translation")
            outputs = dict.fromkeys(node.outputs, bag)
        for tag, pc in node.outputs.items():
            self.bags[pc] = outputs[tag]


def side_values(bag: db.Bag) -> Delayed:
    """A side input's values as one dask task that its consumers depend on.

    Upstream: each consuming task computed the side input's bag itself (once per partition, a
    compute inside a task that can deadlock a small cluster). Passed as a ``Delayed``, dask
    computes it once and hands each consuming task its value; passed as a bag item it re-ran
    its whole upstream.
    """
    return delayed(_windowed)(bag.to_delayed(optimize_graph=False))


def _windowed(partitions: list[list[Any]]) -> list[WindowedValue]:
    return [_in_global_window(value) for part in partitions for value in part]


def _in_global_window(value: Any) -> WindowedValue:
    return WindowedValue(value, 0, (GlobalWindow(),))


class Impulse(te.DaskBagOp):
    """Upstream: Impulse has no translation, so it fell to NoOp, whose ``None`` broke the next
    step (``'NoneType' object has no attribute 'map'``). It emits one empty ``bytes``."""

    def apply(self, input_bag: te.OpInput, side_inputs: te.OpSide = None) -> db.Bag:
        return db.from_sequence([b""], npartitions=1)


class GroupByKey(te.GroupByKey):
    """Upstream's grouping over ``spread`` partitions, spread evenly by count afterwards.

    Upstream: the groups keep the input's partition count (one, after an Impulse), so every step
    after a GroupByKey (the grading of the whole fleet) ran as one task on one worker; and a task
    shuffle of n partitions is n² tasks, so an input of many partitions is first merged.
    """

    spread: int = 1

    def apply(self, input_bag: te.OpInput, side_inputs: te.OpSide = None) -> db.Bag:
        bag = cast(db.Bag, input_bag)
        grouped = super().apply(bag.repartition(npartitions=min(bag.npartitions, self.spread)))
        return grouped.repartition(npartitions=self.spread)


class Flatten(te.Flatten):
    """Upstream's concatenation, merged back to at most ``spread`` partitions.

    Upstream: a Flatten's partitions add up, so each step after one (the sink's, after the
    tables' outputs meet) ran one task per partition of every input, most of them near empty.
    """

    spread: int = 1

    def apply(self, input_bag: te.OpInput, side_inputs: te.OpSide = None) -> db.Bag:
        bags = cast(list[db.Bag], input_bag)
        bag = super().apply(bags) if bags else db.from_sequence([], npartitions=1)
        return bag.repartition(npartitions=min(bag.npartitions, self.spread))


class _Receivers(dict[Tag, "_Collect"]):
    def __missing__(self, tag: Tag) -> _Collect:
        receiver = self[tag] = _Collect()
        return receiver


class _Collect(Receiver):  # type: ignore[misc]
    def __init__(self) -> None:
        self.values: list[WindowedValue] = []

    def receive(self, windowed_value: WindowedValue) -> None:
        self.values.append(windowed_value)


class _Step:
    """What every bundle task of one ParDo needs (a plain class: dask would unpack a dataclass)."""

    def __init__(self, node: AppliedPTransform) -> None:
        transform = cast(beam.ParDo, node.transform)
        main_input = cast(beam.PCollection, next(iter(node.main_inputs.values())))
        self.label = node.full_label
        # Beam's pickler, as Beam ships a DoFn: each bundle gets its own instance (setup, bundle,
        # teardown), whichever worker thread runs it.
        self.fn = pickler.dumps(transform.fn)
        self.window_fn = main_input.windowing.windowfn
        args, kwargs = transform.raw_side_inputs
        self.args, self.kwargs = list(args), kwargs
        self.views = [(type(si), si._view_options()) for si in node.side_inputs]
        self.tags: list[Tag] = [cast(Tag, tag) for tag in node.outputs]


def run_bundle(step: _Step, items: Iterable[Any],
               *sides: list[WindowedValue]) -> tuple[list[list[Any]], MetricUpdates]:
    """One ParDo over one partition: its outputs per tag (in ``step.tags`` order) and the
    bundle's metric updates."""
    receivers = _Receivers()
    handler = _OutputHandler(
        window_fn=step.window_fn, main_receivers=receivers[None], tagged_receivers=receivers,
        per_element_output_counter=None, output_batch_converter=None, process_yields_batches=False,
        process_batch_yields_elements=False)
    invoker = DoFnInvoker.create_invoker(
        DoFnSignature(pickler.loads(step.fn)), handler, context=DoFnContext(step.label, state=None),
        side_inputs=[SideInputMap(cast(Any, view), options, values)
                     for (view, options), values in zip(step.views, sides, strict=True)],
        input_args=step.args, input_kwargs=step.kwargs, user_state_context=None,
        bundle_finalizer_param=DoFn.BundleFinalizerParam())
    # Upstream: ``Metrics.counter(…).inc()`` found no container in a dask task and counted nothing.
    container = MetricsContainer(step.label)
    sampler = statesampler.StateSampler("", CounterFactory())
    previous = statesampler.get_current_tracker()
    statesampler.set_current_tracker(sampler)
    try:
        with sampler.scoped_state(step.label, "process", metrics_container=container):
            invoker.invoke_setup()
            invoker.invoke_start_bundle()
            for item in items:
                invoker.invoke_process(te.get_windowed_value(item, step.window_fn))
            # Upstream: outputs were collected before ``finish_bundle``, so what it emitted was lost.
            invoker.invoke_finish_bundle()
    finally:
        # Also after a failure: a worker process outlives the job, and a DoFn's process-wide
        # state (the sink's staging budget) must not keep a failed bundle's buffers.
        invoker.invoke_teardown()
        statesampler.set_current_tracker(previous)
    return [[wv.value for wv in receivers[tag].values] for tag in step.tags], container.get_cumulative()


class ParDo(te.DaskBagOp):
    """A ParDo as one task per partition of its input, and one bag per output tag.

    Upstream: a single bag held every output, tagged ones as ``TaggedOutput``s (fix 2); side
    inputs were bags computed inside each task (fix 4); ``finish_bundle``'s outputs and the
    metrics were lost (fixes 3, 7; see :func:`run_bundle`).
    """

    def outputs(self, input_bag: db.Bag, sides: list[Delayed]) -> tuple[dict[Tag, db.Bag], list[Delayed]]:
        step = _Step(self.applied)
        name = f"{step.label}-{uuid.uuid4().hex[:12]}"
        bundles = [delayed(run_bundle, pure=False)(step, part, *sides, dask_key_name=(name, i))
                   for i, part in enumerate(input_bag.to_delayed(optimize_graph=False))]
        bags = {tag: db.from_delayed([bundle[0][n] for bundle in bundles]) for n, tag in enumerate(step.tags)}
        return bags, [bundle[1] for bundle in bundles]

    def apply(self, input_bag: te.OpInput, side_inputs: te.OpSide = None) -> db.Bag:
        """The main output, for callers of upstream's interface (a ParDo without side inputs)."""
        return self.outputs(cast(db.Bag, input_bag), [])[0][None]


TRANSLATIONS: dict[type, type[te.DaskBagOp]] = {
    **te.TRANSLATIONS, beam.Impulse: Impulse, beam.ParDo: ParDo, te._GroupByKeyOnly: GroupByKey,
    te._Flatten: Flatten,
}
