"""A ready onnxruntime session on a model that uses the spec ops, on one backend."""

from __future__ import annotations

import contextlib
import gc
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from .. import fusion as fusion_engines
from ..backends import Backend, require, resolve_arithmetic
from ..errors import QuantgraphWarning
from ..fusion.auto import tuner, tuning_cache
from ..fusion.auto.auto_tuning import PENDING, Timing, Tuning, check_mode, default_mode
from ..fusion.auto.tuner import DEFAULT_BUDGET, Choice, Decision
from ..ir.fingerprint import Memo, fingerprint
from ..ir.model_files import ModelLike, has_external_data, load_model
from ..ir.onnx_schemas import register as register_schemas
from ..ir.opsets import check_opset
from ..passes.declared_dst import DeclaredDstPass, needs_declared_dst
from . import candidate_memory, tuning_workers, weights_by_reference
from .candidates import candidate_model, candidate_options, new_session
from .early_dequantize import early_dequantize_warning
from .worker_models import NotByReference

# Timing.isolation when every candidate plan makes one model (nothing is timed, no session made)
NOTHING_TO_TIME = "none: every plan makes one model"


class InferenceSession:
    """``onnxruntime.InferenceSession`` with quantgraph's kernels registered.

    ``backend`` is "native", "python" or "onednn" (default: the fastest available);
    ``arithmetic`` "onnx" (default) or "onednn" where the spec leaves rounding open (see
    :mod:`quantgraph.backends`). A quantize op whose dst only the model's declared output type
    decides gets it as ``output_dtype`` first (:class:`~quantgraph.passes.DeclaredDstPass`). On
    the Python backend the model is put in the form its kernels accept (static ops become
    dynamic ones with constant inputs), and kernel errors recorded during a run are raised from
    :meth:`run`. Quiet on stderr: errors are exceptions, not onnxruntime log lines (unless
    ``options`` sets ``log_severity_level``).

    ``fusion``: "none" (default; each spec op alone, the spec's exact composition),
    "onnxruntime" (units of spec ops and their compute run as onnxruntime's fused kernels, as
    it runs the original QDQ model at the session's optimization level), "onednn" (oneDNN
    Graph forms partitions of spec ops and compute and runs them, with its own requantization
    rounding) or "auto" (the fastest of the candidate plans, measured on this CPU; see
    :mod:`quantgraph.fusion.auto.tuner`). :attr:`fusion_plan` says which unit runs where and why a
    spec op runs alone.

    Fusion "auto" times its candidate plans on ``tune_inputs`` (their shapes are the session's),
    or, without them, on the inputs of the first :meth:`run`; within ``tuning_budget`` seconds,
    keeping the fastest (never a plan slower than fusion "onnxruntime's"; one candidate is
    always the original's own form, every spec op lowered back). Decisions are cached on disk
    (:mod:`quantgraph.fusion.auto.tuning_cache`) per input shapes, for
    ``$QUANTGRAPH_TUNING_MAX_AGE`` days (30); without ``tune_inputs`` the cache is asked at the
    shapes the model fixes, else at the first run's. ``tuning``: "measure" (default, or
    ``$QUANTGRAPH_TUNING``: the cache, else measure), "cache" (the cache, else the onnxruntime
    plan, never measuring) or "force" (measure again). ``fusion_plan.tuning`` holds the decision
    and its times.

    ``after_fusion``, when given, is called with the session's private copy once fusion has
    planned it (validation exposes tensors as outputs there: exposed before planning, they
    would be kept out of every unit).
    """

    def __init__(
        self,
        model: ModelLike,
        backend: str | None = None,
        *,
        arithmetic: str | None = None,
        options: ort.SessionOptions | None = None,
        providers: Sequence[str] = ("CPUExecutionProvider",),
        fusion: str = fusion_engines.NONE,
        tune_inputs: Mapping[str, np.ndarray] | None = None,
        tuning: str | None = None,
        tuning_budget: float = DEFAULT_BUDGET,
        after_fusion: Callable[[ir.Model], None] | None = None,
    ) -> None:
        register_schemas()
        self._after_fusion = after_fusion
        self._backend = require(backend)
        # Backends whose kernels record errors need a call around each run; others get none
        # (a run of a 40 us model pays for every Python call around it).
        kind = type(self._backend)
        self._hooks = (
            kind.before_run is not Backend.before_run or kind.after_run is not Backend.after_run
        )
        self.backend = self._backend.name
        self.arithmetic = resolve_arithmetic(self._backend, arithmetic)
        self.fusion = fusion
        self.fusion_plan = fusion_engines.FusionPlan(fusion_engines.NONE)
        self._providers = list(providers)
        self._level = int(
            options.graph_optimization_level
            if options is not None
            else ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # onnxruntime's own default
        )
        self._tuning: Tuning | None = None
        if fusion == fusion_engines.AUTO:
            self._tuning = self._start_tuning(model, options, tuning, tuning_budget)
            decision = self._tuning.decide(tune_inputs, self._candidate_timing)
            source = self._prepare(self._tuning.model, self._level, decision)
        else:
            source = self._prepare(model, self._level)
        self._options = options or ort.SessionOptions()
        if self._options.log_severity_level == -1:  # not chosen by the caller
            # Quiet: onnxruntime's errors come back once, as the exception; its raw log lines
            # ([E:onnxruntime:...] on a failing kernel or a node oneDNN refuses) would repeat
            # them on stderr.
            self._options.log_severity_level = 4
        collect = _collectable(source)
        if collect:
            gc.collect()  # the copies fusion planned on go before the session is made
        self._session = self._new_session(source, self._options, self.fusion_plan)
        del source  # onnxruntime holds the model now
        if collect:
            gc.collect()
        decided = self.fusion_plan.tuning
        self._pending = decided is not None and decided.source == PENDING
        if self._pending and type(self).run is InferenceSession.run:
            self.run = self._decide_then_run  # type: ignore[method-assign]
        elif not self._hooks and type(self).run is InferenceSession.run:
            # Nothing to do around a run: callers reach onnxruntime's own method, without a
            # Python frame of ours in between (0.3-0.8 us a call on a 31 us model). A subclass
            # that overrides run keeps its own.
            self.run = self._session.run  # type: ignore[method-assign]
        # Which build of an outside engine runs the ops (oneDNN's, on the onednn backend).
        self.onednn_version: str | None = self._backend.engine_version()

    def _new_session(
        self,
        source: str | bytes | ir.Model,
        options: ort.SessionOptions,
        plan: fusion_engines.FusionPlan,
    ) -> ort.InferenceSession:
        """An onnxruntime session on ``source`` with the backend (and oneDNN partitions'
        kernel, where ``plan`` has partitions) registered in ``options``."""
        return new_session(
            self._backend,
            self.arithmetic,
            source,
            options,
            partitions=fusion_engines.uses_partitions(plan),
            providers=self._providers,
        )

    # -- fusion "auto" (quantgraph.fusion.auto.auto_tuning) ----------------------------------------

    def _start_tuning(
        self,
        model: ModelLike,
        options: ort.SessionOptions | None,
        mode: str | None,
        budget: float,
    ) -> Tuning:
        from ..backends import onednn

        loaded = load_model(model)
        check_opset(loaded, model)
        threads = 0 if options is None else int(options.intra_op_num_threads)
        versions = {"onnxruntime": ort.__version__, "onednn": onednn.version() or "none"}
        key = tuning_cache.model_key(
            fingerprint(loaded),  # not serialized: the weights stay where they are
            threads=threads,
            level=self._level,
            backend=self.backend,
            arithmetic=self.arithmetic,
            versions=versions,
        )
        self._threads = threads
        return Tuning(
            loaded.clone(),  # a private copy sharing the tensors (external data stays put)
            key,
            check_mode(mode or default_mode()),
            budget,
        )

    @contextlib.contextmanager
    def _candidate_timing(
        self, candidates: Sequence[Choice], feeds: Mapping[str, np.ndarray]
    ) -> Iterator[Timing]:
        """The candidate plans ready to time: each in a worker process of its own, unless
        :func:`~.tuning_workers.in_process` says why not."""
        assert self._tuning is not None
        planned: dict[str, tuple[ir.Model, fusion_engines.FusionPlan]] = {}
        same: dict[str, str] = {}
        made: dict[bytes, str] = {}
        memo: Memo = {}  # the weights the candidates share are hashed once
        for choice in candidates:  # two plans making the same model are timed once
            model, plan = candidate_model(self._tuning.model, choice, self._level, self._backend)
            digest = fingerprint(model, memo)
            if digest in made:
                same[choice.name] = made[digest]
                continue
            made[digest] = choice.name
            planned[choice.name] = (model, plan)
        if len(planned) < 2:  # every plan makes one model: no session to time (nor to hold)
            yield Timing({}, NOTHING_TO_TIME, same)
            return
        dropped: tuner.Dropped = {}  # candidates that could not be made or run, and why
        weights = candidate_memory.weights_bytes(self._tuning.model)
        crowded = candidate_memory.crowded(weights, len(planned))
        settings = tuning_workers.Settings(
            self.backend, self.arithmetic, self._level, self._threads, tuple(self._providers)
        )
        jobs = {
            name: tuning_workers.Job(model, fusion_engines.uses_partitions(plan))
            for name, (model, plan) in planned.items()
        }
        if crowded is not None:  # one session alive at a time
            with contextlib.ExitStack() as stack:
                how = tuning_workers.one_at_a_time_in_process(feeds)
                openers: dict[str, tuner.Opener] = {}
                if how is None:  # each in a worker process, which takes its memory with it
                    try:
                        openers = stack.enter_context(
                            tuning_workers.worker_openers(jobs, feeds, settings)
                        )
                        how = "each in a process of its own"
                    except NotByReference as error:
                        how = f"in this process ({error})"
                else:
                    how = f"in this process ({how})"
                if not openers:
                    openers = {
                        n: self._candidate_opener(m, p, feeds) for n, (m, p) in planned.items()
                    }
                yield Timing({}, f"one at a time, {how}: {crowded}", same, openers, dropped)
            return
        why = tuning_workers.in_process(self._tuning.model, feeds, weights)
        if why is None:
            with tuning_workers.worker_turns(jobs, feeds, settings, dropped) as turns:
                yield Timing(turns, "processes", same, dropped=dropped)
            return
        runs: dict[str, Callable[[], object]] = {}
        first = next(iter(planned))
        for name, (model, plan) in planned.items():
            try:
                runs[name] = self._candidate_run(model, plan, feeds)
            except Exception as error:  # a candidate that cannot be made is never chosen
                tuner.drop(name, error, first, dropped, tuner.MAKING)
        yield Timing(tuner.turns_of(runs), f"in-process: {why}", same, dropped=dropped)

    def _candidate_opener(
        self, model: ir.Model, plan: fusion_engines.FusionPlan, feeds: Mapping[str, np.ndarray]
    ) -> tuner.Opener:
        """A candidate's session made for a block of turns (freed with the turn)."""

        @contextlib.contextmanager
        def opened() -> Iterator[tuner.Turn]:
            yield tuner.turns_of({"run": self._candidate_run(model, plan, feeds)})["run"]

        return opened

    def _candidate_run(
        self, model: ir.Model, plan: fusion_engines.FusionPlan, feeds: Mapping[str, np.ndarray]
    ) -> Callable[[], object]:
        """One call of a candidate's session in this process."""
        options = candidate_options(self._level, self._threads)
        source = weights_by_reference.source(model, options)  # external data: no copy
        session = self._new_session(source.model, options, plan)
        feed = dict(feeds)

        def run() -> object:
            assert source.held is not None  # onnxruntime reads the weights it holds
            self._backend.before_run()
            done = session.run(None, feed)
            self._backend.after_run()
            return done

        return run

    def _decide_then_run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, np.ndarray],
        run_options: ort.RunOptions | None = None,
    ) -> list[Any]:
        """The first run of a session whose fusion "auto" had no inputs to measure on: decide
        on these, re-plan if another plan won, then run as every later call does (a caller
        holding this bound method keeps calling it: later calls only run)."""
        if self._pending:
            assert self._tuning is not None
            decision = self._tuning.decide(input_feed, self._candidate_timing)
            pending = self.fusion_plan.tuning
            if decision.choice == pending.choice:  # the plan it runs: planned once is enough
                self.fusion_plan = fusion_engines.with_decision(self.fusion_plan, decision)
            else:
                source = self._prepare(self._tuning.model, self._level, decision)
                self._session = self._new_session(source, self._options_copy(), self.fusion_plan)
                collect = _collectable(source)
                del source
                if collect:
                    gc.collect()
            self._pending = False
            if not self._hooks:
                self.run = self._session.run  # type: ignore[method-assign]
            else:
                del self.run  # the class's run, with the backend's calls around it
        return InferenceSession.run(self, output_names, input_feed, run_options)

    def _options_copy(self) -> ort.SessionOptions:
        """The caller's options for a second session (libraries register once per object)."""
        options = ort.SessionOptions()
        given = self._options
        options.graph_optimization_level = given.graph_optimization_level
        options.intra_op_num_threads = given.intra_op_num_threads
        options.inter_op_num_threads = given.inter_op_num_threads
        options.execution_mode = given.execution_mode
        options.log_severity_level = given.log_severity_level
        options.enable_profiling = given.enable_profiling
        for entry in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning"):
            value = given.get_session_config_entry(entry) if _has_entry(given, entry) else ""
            if value:
                options.add_session_config_entry(entry, value)
        return options

    def _prepare(
        self, model: ModelLike, level: int, decision: Decision | None = None
    ) -> str | bytes | ir.Model:
        """What onnxruntime loads: the file itself or the caller's serialized model when they
        run as they are, else the model in memory (a prepared private copy, whose weights
        onnxruntime reads from their files: :mod:`quantgraph.backends.ort_sessions`)."""
        is_path = isinstance(model, (str, os.PathLike))
        loaded = load_model(model)  # the same clear errors everywhere for a bad file
        check_opset(loaded, model)
        declared = needs_declared_dst(loaded)
        fused = self.fusion != fusion_engines.NONE
        hook = self._after_fusion
        if loaded is model and (declared or fused or self._backend.prepares or hook):
            loaded = loaded.clone()  # the caller's object stays as it was (tensors shared)
        # The seed's dst rule: a declared output type no kernel could see becomes output_dtype.
        changed = declared and DeclaredDstPass()(loaded).modified
        if fused:
            self.fusion_plan = fusion_engines.apply(
                loaded, self.fusion, level=level, decision=decision
            )
            changed = changed or bool(self.fusion_plan.units)
        else:
            told = early_dequantize_warning(loaded, level)
            if told is not None:
                warnings.warn(told, QuantgraphWarning, stacklevel=3)
        if hook is not None:
            hook(loaded)
            changed = True
        changed = self._backend.prepare(loaded) or changed
        if not changed:
            if is_path:
                return str(Path(model))  # type: ignore[arg-type]
            if isinstance(model, bytes):
                return model
            if isinstance(model, onnx.ModelProto) and not has_external_data(loaded):
                serialized: bytes = model.SerializeToString()
                return serialized
        return loaded

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, np.ndarray],
        run_options: ort.RunOptions | None = None,
    ) -> list[Any]:
        """onnxruntime's ``run`` with the backend's calls around it; a session whose backend
        needs none has onnxruntime's own method in its place."""
        feed = input_feed if type(input_feed) is dict else dict(input_feed)
        self._backend.before_run()
        results: list[Any] = self._session.run(output_names, feed, run_options)
        self._backend.after_run()
        return results

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not set yet (a failing __init__): no recursion below
            raise AttributeError(name)
        # get_inputs, get_outputs, get_modelmeta, ... come from onnxruntime's session.
        return getattr(self._session, name)


def _collectable(source: str | bytes | ir.Model) -> bool:
    """Whether to collect once onnxruntime holds its session on ``source``: a prepared copy
    of a model whose weights live in external data, and the copies fusion planned on, hold
    in-memory weights as large as the model's (a fused plan's restored MatMulNBits, ...), and
    their graphs are reference cycles, which the command line (running without the
    collector) would keep to the end."""
    return isinstance(source, ir.Model) and has_external_data(source)


def _has_entry(options: ort.SessionOptions, entry: str) -> bool:
    try:
        options.get_session_config_entry(entry)
    except Exception:  # onnxruntime raises for an entry never set
        return False
    return True
