"""The :class:`Fuzzer`: runs each :class:`~tools.fuzz.case.Case` on every runner (the
reference, the native backend in both arithmetics, the Python and onednn backends, onnxruntime's
Q/DQ) with the sessions cached per signature, and counts agreements, expected rule errors and
mismatches into a :class:`~tools.fuzz.report.FuzzReport`."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto

from quantgraph import reference
from quantgraph.backends import native_available
from quantgraph.backends.onednn import unavailable_reason as onednn_unavailable
from quantgraph.errors import BackendError, BackendLimit
from quantgraph.reference.compare import compare
from quantgraph.runtime.session import InferenceSession
from quantgraph.spec import OPS as SPEC_OPS
from quantgraph.spec import QUANTIZE, SpecError, dtypes
from quantgraph.testing import (
    Input,
    from_ort_value,
    one_op_model,
    ort_session,
    quiet_session_options,
    to_ort_value,
)

from .case import NODE, QUANTIZE_OPS, Case, Profile, Signature, bits
from .models import dynamic_model, static_model
from .report import FuzzReport, OpStats
from .strategies import F32, per_element

BACKEND_NAMES = ("native", "python", "onednn")
# How the onednn backend says oneDNN refused a row (at session creation or at run time).
# "<Op> node '<name>': oneDNN <version> refused <row>: ..." or "...: refused <row> ...: oneDNN
# applies zps[0] ..." / "...: oneDNN <version> misreads ..." (custom_ops/src/onednn/kernel.cc).
ONEDNN_REFUSED = re.compile(r"node '[^']*': (oneDNN [0-9.]+ )?refused ")


# -- sessions ------------------------------------------------------------------------------------


def _options(threads: int) -> ort.SessionOptions:
    # Rejected calls are asserted on, not logged; many cached sessions must not spin.
    return quiet_session_options(threads=threads, inter_op_threads=1, spinning=False)


_RUN_OPTIONS = ort.RunOptions()
_RUN_OPTIONS.log_severity_level = 4


def _run_raw(session: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    values = {name: to_ort_value(array) for name, array in feeds.items()}
    return from_ort_value(session.run_with_ort_values(None, values, _RUN_OPTIONS)[0])


Outcome = np.ndarray | BaseException


@dataclass
class _Sessions:
    native: Any = None  # InferenceSession or the error creating it raised
    native_onednn: Any = None  # the native kernels in oneDNN's arithmetic
    python: Any = None
    onednn: Any = None  # the onednn backend (oneDNN's Graph API)


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[Any, Any] = OrderedDict()
        self.created = 0

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        value = make()
        self.created += 1
        self.entries[key] = value
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return value


def _create(
    model: onnx.ModelProto, backend: str, threads: int, arithmetic: str | None = None
) -> Any:
    try:
        return InferenceSession(model, backend, arithmetic=arithmetic, options=_options(threads))
    except Exception as error:
        return error


# -- comparison ----------------------------------------------------------------------------------


def _has_rule(error: BaseException, op: str, rule: str, node: str | None) -> bool:
    """The error is ``<op> node '<node>': ... [rule <rule>]`` (op exactly: not Dynamic<op>)."""
    text = str(error)
    named = rf"(?<![A-Za-z]){re.escape(op)} node '{re.escape(node) if node is not None else ''}"
    return re.search(named, text) is not None and f"[rule {rule}]" in text


# -- the fuzzer ----------------------------------------------------------------------------------


def python_limit(case: Case) -> str | None:
    """Why the Python backend cannot run this model (its documented BackendError), or None."""
    sig = case.sig
    if dtypes.BY_NAME[sig.src].is_float8 or dtypes.BY_NAME[sig.dst].is_float8:
        return "float8"
    if dtypes.BY_NAME[sig.src].bits == 4 or (sig.zps and dtypes.BY_NAME[sig.zps].bits == 4):
        return "4-bit"
    if sig.scales != "f32":
        return "f16/bf16"
    op = SPEC_OPS[sig.op]
    if not op.is_static and sig.zps is None and (sig.per_channel or sig.group_shape):
        return "per_channel/per_group without zps over symbolic dims (scales' shape unknown)"
    if sig.op == QUANTIZE.name and case.zps is not None:
        low, high = dtypes.BY_NAME[sig.dst].int_range
        if np.any(case.zps < low) or np.any(case.zps > high):
            return "static zps that do not fit dst"
    return None


# Rules the Python backend checks on static ops before deciding whether it can run them.
_PYTHON_FIRST_RULES = ("scale-value", "zps-value")


class Fuzzer:
    """Runs cases on every runner and keeps the figures (sessions cached across cases)."""

    def __init__(self, profile: Profile, report: FuzzReport) -> None:
        self.profile = profile
        self.report = report
        self.native = native_available()
        self.onednn = onednn_unavailable() is None
        self._dynamic = _LRU(profile.cache_size)
        self._onnxruntime = _LRU(profile.cache_size)

    # runners

    def _sessions(self, sig: Signature) -> _Sessions:
        def make() -> _Sessions:
            model = dynamic_model(sig)
            return _Sessions(
                native=_create(model, "native", 2) if self.native else None,
                native_onednn=_create(model, "native", 2, "onednn") if self.native else None,
                python=_create(model, "python", 1),
                onednn=_create(model, "onednn", 1) if self.onednn else None,
            )

        sessions: _Sessions = self._dynamic.get(sig, make)
        return sessions

    def _feeds(self, case: Case) -> dict[str, np.ndarray]:
        feeds = {"src": case.src}
        if not case.static:
            feeds["scales"] = case.scales
            if case.zps is not None:
                feeds["zps"] = case.zps
        return feeds

    def run_native(self, case: Case, arithmetic: str = "onnx") -> Outcome:
        if case.static:
            threads = 2 if case.src.size > 2**17 else 1
            session = _create(static_model(case), "native", threads, arithmetic)
            self._stats(case).sessions += 1
        else:
            sessions = self._sessions(case.sig)
            session = sessions.native if arithmetic == "onnx" else sessions.native_onednn
        return self._outcome(case, session, _run_raw)

    def run_onednn(self, case: Case) -> Outcome:
        return self._outcome(case, self._session(case, "onednn"), _run_raw)

    def run_python(self, case: Case) -> Outcome:
        def run(session: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
            return np.asarray(session.run(None, feeds)[0])

        return self._outcome(case, self._session(case, "python"), run)

    def _session(self, case: Case, backend: str) -> Any:
        """A static case's own session (one thread), else the signature's cached one."""
        if case.static:
            session = _create(static_model(case), backend, 1)
            self._stats(case).sessions += 1
            return session
        return getattr(self._sessions(case.sig), backend)

    def _outcome(
        self,
        case: Case,
        session: Any,
        run: Callable[[Any, dict[str, np.ndarray]], np.ndarray],
    ) -> Outcome:
        """What running the case gave: its output, or the error of creating or running it."""
        if isinstance(session, BaseException):
            return session
        try:
            return run(session, self._feeds(case))
        except Exception as error:
            return error

    @staticmethod
    def run_reference(case: Case, arithmetic: str = "onnx") -> Outcome:
        """quantgraph.reference; ``arithmetic="onednn"``: its numpy model of oneDNN's."""
        attributes: dict[str, Any] = case.reference_kwargs()
        node = attributes.pop("node", "")
        try:
            if case.static:
                attributes["scales"] = [float(v) for v in case.scales]
                if case.zps is not None:
                    attributes["zps"] = [int(v) for v in case.zps]
                return reference.run(
                    case.sig.op, [case.src], attributes, node=node, arithmetic=arithmetic
                )
            return reference.run(
                case.sig.op,
                [case.src, case.scales, case.zps],
                attributes,
                node=node,
                arithmetic=arithmetic,
            )
        except SpecError as error:
            return error

    def onnxruntime_zero_point(self, case: Case) -> tuple[bool, np.ndarray | None]:
        """Whether ONNX defines the same call, and the zero point it takes (typed)."""
        sig = case.sig
        if case.rule is not None or sig.group_shape is not None or sig.scales != "f32":
            return False, None  # per_group is blocked Q/DQ, f16 scales another model: not here
        quantized = dtypes.BY_NAME[sig.dst if sig.op in QUANTIZE_OPS else sig.src]
        if quantized.bits == 4:
            return False, None
        if case.zps is None:
            return True, None
        if quantized.is_float8:
            return False, None
        if not case.static:
            return case.zps.dtype == quantized.numpy, case.zps
        low, high = quantized.int_range
        if np.any(case.zps < low) or np.any(case.zps > high):
            return False, None
        return True, case.zps.astype(quantized.numpy)

    def run_onnxruntime(self, case: Case, zero_point: np.ndarray | None) -> Outcome:
        sig = case.sig
        quantize = sig.op in QUANTIZE_OPS
        axis = sig.resolved_axis
        key = (
            quantize,
            sig.src,
            sig.dst,
            None if zero_point is None else str(zero_point.dtype),
            sig.rank,
            axis,
        )

        def make() -> Any:
            self._stats(case).sessions += 1
            return self._onnxruntime_session(case, zero_point, axis)

        session = self._onnxruntime.get(key, make)
        per_axis = axis is not None
        feeds = {"x": case.src, "scale": case.scales if per_axis else case.scales.reshape(())}
        if zero_point is not None:
            feeds["zp"] = zero_point if per_axis else zero_point.reshape(())
        try:
            return _run_raw(session, feeds)
        except Exception as error:
            return error

    @staticmethod
    def _onnxruntime_session(case: Case, zero_point: np.ndarray | None, axis: int | None) -> Any:
        sig = case.sig
        quantize = sig.op in QUANTIZE_OPS
        per_axis = axis is not None
        dims = [f"d{i}" for i in range(sig.rank)]
        scale_shape = ["c"] if per_axis else []
        inputs: dict[str, Input] = {
            "x": (dtypes.BY_NAME[sig.src].onnx, dims),
            "scale": (TensorProto.FLOAT, scale_shape),
        }
        if zero_point is not None:
            inputs["zp"] = (dtypes.onnx_of_numpy(zero_point.dtype), scale_shape)
        attributes: dict[str, Any] = {"axis": axis if per_axis else 1}
        if quantize and zero_point is None:
            attributes["output_dtype"] = dtypes.BY_NAME[sig.dst].onnx
        model = one_op_model(
            "QuantizeLinear" if quantize else "DequantizeLinear",
            inputs,
            {"y": (dtypes.BY_NAME[sig.dst].onnx, dims)},
            name="",
            graph_name="qdq",
            **attributes,
        )
        return ort_session(model, _options(1))

    # checking

    def _stats(self, case: Case) -> OpStats:
        return self.report.ops.setdefault(case.sig.op, OpStats())

    def _mismatch(
        self, case: Case, runner: str, kind: str, detail: dict[str, Any], elements: int = 0
    ) -> None:
        stats = self._stats(case)
        stats.mismatches += 1
        stats.mismatched_elements += elements
        record = {"runner": runner, "kind": kind, **detail, "case": case.repro()}
        if len(self.report.details) < 50:
            self.report.details.append(record)

    def _compare(self, case: Case, runner: str, got: Outcome, want: np.ndarray) -> None:
        stats = self._stats(case)
        if isinstance(got, BaseException):
            self._mismatch(case, runner, "unexpected error", {"error": _one_line(got)})
            return
        result = compare(case.sig.op, want, got)
        key = f"{runner}-vs-reference"
        stats.compared[key] = stats.compared.get(key, 0) + int(want.size)
        stats.elements += int(want.size)
        count = result.mismatches
        if not count:
            return
        if result.first_mismatch is None or got.shape != want.shape or got.dtype != want.dtype:
            detail: dict[str, Any] = {
                "got": f"{got.dtype}{list(got.shape)}",
                "want": f"{want.dtype}{list(want.shape)}",
            }
        else:
            index = result.first_mismatch
            flat_src = case.src.reshape(-1)
            detail = {
                "count": count,
                "index": index,
                "src": repr(flat_src[index]),
                "src_bits": hex(int(bits(flat_src[index : index + 1])[0])),
                "got": repr(got.reshape(-1)[index]),
                "want": repr(want.reshape(-1)[index]),
            }
        self._mismatch(case, runner, "value", detail, count)

    def _expect_error(self, case: Case, runner: str, got: Outcome, node: str | None) -> None:
        assert case.rule is not None
        if isinstance(got, BaseException) and _has_rule(got, case.sig.op, case.rule, node):
            self._stats(case).errors_checked += 1
            return
        if isinstance(got, BaseException):
            detail = {"expected_rule": case.rule, "error": _one_line(got)}
            self._mismatch(case, runner, "wrong error", detail)
        else:
            self._mismatch(case, runner, "missing error", {"expected_rule": case.rule})

    def _python_not_runnable(self, case: Case, got: Outcome) -> bool:
        """The Python backend's documented BackendError (counted), else a mismatch."""
        if isinstance(got, BackendLimit):
            self._stats(case).python_not_runnable += 1
            return True
        detail = {"expected": f"BackendError ({python_limit(case)})"}
        if isinstance(got, BaseException):
            detail["error"] = _one_line(got)
        self._mismatch(case, "python", "expected BackendError", detail)
        return False

    def _onednn_refused(self, case: Case, got: Outcome) -> bool:
        """oneDNN refused the row (the onednn backend's documented one-line error): counted."""
        if isinstance(got, BaseException) and ONEDNN_REFUSED.search(str(got)):
            self._stats(case).onednn_refused += 1
            return True
        return False

    def _onednn_nan_s8(self, case: Case, got: Outcome, want: np.ndarray) -> bool:
        """oneDNN (v3.2, measured) quantizes a NaN product x * fl(1/s) to 127 for s8, where the
        numpy model of oneDNN (and the native backend in its arithmetic) gives -128: counted
        apart when every difference is that one."""
        sig = case.sig
        if isinstance(got, BaseException) or sig.op not in QUANTIZE_OPS or sig.dst != "s8":
            return False
        if got.shape != want.shape or got.dtype != want.dtype:
            return False
        differ = got.reshape(-1) != want.reshape(-1)
        if not differ.any():
            return False
        scales = per_element(case.scales, case.src.shape, case.sig.resolved_axis, 1.0)
        with np.errstate(all="ignore"):
            product = case.src.reshape(-1) * (F32(1) / scales.astype(F32))
        nan = np.isnan(product)
        if not np.all(nan[differ]) or not np.all(got.reshape(-1)[differ] == 127):
            return False
        self._stats(case).onednn_nan_s8 += 1
        return True

    def check(self, case: Case) -> None:
        stats = self._stats(case)
        stats.examples += 1
        stats.rows[case.sig.row()] = stats.rows.get(case.sig.row(), 0) + 1
        want = self.run_reference(case)
        native = self.run_native(case) if self.native else None
        native_onednn = self.run_native(case, "onednn") if self.native else None
        onednn = self.run_onednn(case) if self.onednn else None
        python = self.run_python(case)
        limit = python_limit(case)
        if case.rule is not None:
            stats.error_examples += 1
            if isinstance(want, SpecError) and want.rule == case.rule:
                stats.errors_checked += 1
            else:
                detail = {"expected_rule": case.rule, "got": _one_line(want)}
                self._mismatch(case, "reference", "wrong error", detail)
            if native is not None:
                self._expect_error(case, "native", native, NODE)
            if native_onednn is not None:
                self._expect_error(case, "native_onednn", native_onednn, NODE)
            if onednn is not None and not self._onednn_refused(case, onednn):
                self._expect_error(case, "onednn", onednn, NODE)
            python_first = case.static and case.rule in _PYTHON_FIRST_RULES
            if limit is None or python_first:
                self._expect_error(case, "python", python, None)
            elif not isinstance(python, BackendError):
                self._expect_error(case, "python", python, None)  # a rule error is fine too
            else:
                self._python_not_runnable(case, python)
            return
        stats.valid_examples += 1
        if isinstance(want, BaseException):
            self._mismatch(case, "reference", "unexpected error", {"error": _one_line(want)})
            return
        if native is not None:
            self._compare(case, "native", native, want)
        if native_onednn is not None or onednn is not None:
            want_onednn = self.run_reference(case, "onednn")
            if isinstance(want_onednn, BaseException):
                detail = {"error": _one_line(want_onednn)}
                self._mismatch(case, "reference_onednn", "unexpected error", detail)
            else:
                if native_onednn is not None:
                    self._compare(case, "native_onednn", native_onednn, want_onednn)
                if (
                    onednn is not None
                    and not self._onednn_refused(case, onednn)
                    and not self._onednn_nan_s8(case, onednn, want_onednn)
                ):
                    self._compare(case, "onednn", onednn, want_onednn)
        if limit is None:
            self._compare(case, "python", python, want)
        else:
            self._python_not_runnable(case, python)
        defined, zero_point = self.onnxruntime_zero_point(case)
        if defined:
            stats.onnxruntime_examples += 1
            self._compare(case, "onnxruntime", self.run_onnxruntime(case, zero_point), want)

    def sessions_created(self) -> int:
        per_signature = (3 if self.native else 1) + (1 if self.onednn else 0)
        return self._dynamic.created * per_signature


def _one_line(error: object) -> str:
    text = str(error).strip().splitlines()
    head = text[0] if text else ""
    return f"{type(error).__name__}: {head}"[:400]
