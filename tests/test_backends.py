"""Backends are objects in one registry: the registry's names and errors, why each backend
cannot run when its library is missing (simulated by a variable pointing nowhere, as a user's
typo would), a session driven only through the object, and no module outside
``quantgraph/backends/`` testing a backend's name."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto

import quantgraph
from quantgraph import backends
from quantgraph.backends import (
    Backend,
    BackendError,
    BackendUnavailable,
    KernelError,
    Unavailable,
    native,
    onednn,
    python,
)
from quantgraph.runtime.support import node_support
from tests.builders import spec_op_model

ROOT = Path(__file__).resolve().parent.parent

PACKAGE = Path(quantgraph.__file__).parent
NOWHERE = "/nonexistent/quantgraph-test/lib.so"
F, U8 = TensorProto.FLOAT, TensorProto.UINT8


def _quantize_model() -> bytes:
    model = spec_op_model("DynamicQuantize", (F, [2, 3]), (F, [1]), (U8, [1]), dst_type=U8)
    data: bytes = model.SerializeToString()
    return data


@pytest.fixture
def no_library_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (
        native.ENV_LIBRARY,
        native.ENV_LIBRARY_DEPRECATED,
        onednn.ENV_LIBRARY,
        onednn.ENV_KERNELS,
        onednn.ENV_KERNELS_DEPRECATED,
    ):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# -- the registry --------------------------------------------------------------------------------


def test_the_registry_names_every_backend_in_default_order() -> None:
    assert backends.names() == ("native", "python", "onednn")
    assert backends.names() == backends.BACKENDS
    for name in backends.names():
        backend = backends.get(name)
        assert isinstance(backend, Backend)
        assert backend.name == name
        assert backend.arithmetics[0] in backends.ARITHMETICS
        assert backend.engine


@pytest.mark.parametrize("name", ["cuda", "", "Native"])
def test_an_unknown_name_lists_the_choices(name: str) -> None:
    expected = f"unknown backend {name!r}; choose one of native, python, onednn"
    with pytest.raises(BackendError) as raised:
        backends.get(name)
    assert str(raised.value) == expected
    if name:  # "" asks for the default backend
        with pytest.raises(BackendError, match=f"^{expected}$"):
            quantgraph.InferenceSession(_quantize_model(), name)


@pytest.mark.parametrize(
    ("name", "wanted", "message"),
    [
        ("python", "onednn", "the python backend computes the onnx arithmetic only; "),
        ("onednn", "onnx", "the onednn backend computes oneDNN's own arithmetic, not 'onnx'"),
    ],
)
def test_a_backend_refuses_an_arithmetic_it_does_not_compute(
    name: str, wanted: str, message: str
) -> None:
    with pytest.raises(BackendError, match=f"^{message}"):
        backends.resolve_arithmetic(name, wanted)


def test_arithmetics_each_backend_computes() -> None:
    assert backends.get("native").arithmetics == ("onnx", "onednn")
    assert backends.get("python").arithmetics == ("onnx",)
    assert backends.get("onednn").arithmetics == ("onednn",)
    for name in backends.names():
        assert backends.resolve_arithmetic(name, None) == backends.get(name).arithmetics[0]


# -- why a backend cannot run --------------------------------------------------------------------


def test_native_names_the_variable_pointing_nowhere(
    no_library_variables: pytest.MonkeyPatch,
) -> None:
    no_library_variables.setenv(native.ENV_LIBRARY, NOWHERE)
    missing = native.BACKEND.available()
    assert isinstance(missing, Unavailable)
    assert missing.backend == "native"
    assert missing.reason == f"QUANTGRAPH_NATIVE_LIBRARY={NOWHERE!r} is not a file"
    assert missing.hint == f"unset it or {native.BUILD_HINT}"
    assert missing.message == f"the native backend cannot run: {missing.reason}; {missing.hint}"
    # Asked for by the variable, so it is the default, and refused with that reason.
    assert backends.default_backend() == "native"
    with pytest.raises(BackendUnavailable) as raised:
        quantgraph.InferenceSession(_quantize_model())
    assert raised.value.unavailable == missing
    assert str(raised.value) == missing.message


def test_native_not_built(no_library_variables: pytest.MonkeyPatch, tmp_path: Path) -> None:
    no_library_variables.setattr(native, "_candidates", lambda: [tmp_path / native.LIBRARY_NAME])
    missing = native.BACKEND.available()
    assert missing is not None
    assert missing.reason == "the native kernel library is not built"
    assert missing.hint == native.NOT_BUILT_HINT
    assert missing.message == f"the native backend is not built: {native.NOT_BUILT_HINT}"
    assert not backends.native_available()
    assert backends.default_backend() == "python"  # nothing asks for native: no error


def test_onednn_without_onednn(no_library_variables: pytest.MonkeyPatch) -> None:
    no_library_variables.setenv(onednn.ENV_LIBRARY, NOWHERE)
    missing = onednn.BACKEND.available()
    assert missing is not None
    assert missing.backend == "onednn"
    assert missing.reason == f"QUANTGRAPH_ONEDNN_LIBRARY={NOWHERE!r} is not a file"
    assert missing.hint == "unset it or point it at a oneDNN 3.x libdnnl.so.3"
    assert missing.message == f"the onednn backend cannot run: {missing.reason}; {missing.hint}"
    assert onednn.unavailable_reason() == f"{missing.reason}; {missing.hint}"
    with pytest.raises(BackendUnavailable, match=r"^the onednn backend cannot run: "):
        quantgraph.InferenceSession(_quantize_model(), "onednn")


def test_onednn_without_its_kernel_library(no_library_variables: pytest.MonkeyPatch) -> None:
    no_library_variables.setenv(onednn.ENV_LIBRARY, __file__)  # any file passes that check
    no_library_variables.setenv(onednn.ENV_KERNELS, NOWHERE)
    missing = onednn.BACKEND.available()
    assert missing is not None
    assert missing.reason == f"QUANTGRAPH_ONEDNN_KERNELS_LIBRARY={NOWHERE!r} is not a file"
    assert missing.message == f"the onednn backend cannot run: {missing.reason}"


def test_python_without_onnxruntime_extensions(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec  # the module python.py imports
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == python.EXTENSIONS else real(name, *a),
    )
    missing = python.BACKEND.available()
    assert missing is not None
    assert missing.reason == "onnxruntime-extensions is not installed"
    assert missing.hint == "pip install onnxruntime-extensions"
    with pytest.raises(BackendUnavailable, match=r"^the python backend cannot run: "):
        backends.require("python")


def test_probing_a_missing_backend_raises_once_instead_of_refusing_each_node(
    no_library_variables: pytest.MonkeyPatch,
) -> None:
    import onnx_ir as ir

    no_library_variables.setenv(onednn.ENV_LIBRARY, NOWHERE)
    model = ir.from_proto(
        spec_op_model("DynamicQuantize", (F, [2, 3]), (F, [1]), (U8, [1]), dst_type=U8)
    )
    with pytest.raises(BackendUnavailable, match="QUANTGRAPH_ONEDNN_LIBRARY"):
        node_support(model, "onednn")


# -- a session asks the object --------------------------------------------------------------------


class _Counting(python.PythonBackend):
    """The python backend under another name, counting its run hooks."""

    name = "counting"

    def __init__(self) -> None:
        self.runs: list[str] = []

    def before_run(self) -> None:
        self.runs.append("before")
        super().before_run()

    def after_run(self) -> None:
        self.runs.append("after")
        super().after_run()


def test_a_session_runs_any_registered_backend_through_its_methods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counting = _Counting()
    monkeypatch.setitem(backends._REGISTRY, counting.name, counting)
    session = quantgraph.InferenceSession(_quantize_model(), "counting")
    assert (session.backend, session.arithmetic, session.onednn_version) == (
        "counting",
        "onnx",
        None,
    )
    src = np.array([[0.0, 0.5, 1.0], [-1.0, 2.0, 3.0]], np.float32)
    feeds: dict[str, np.ndarray] = {
        "src": src,
        "scales": np.array([0.5], np.float32),
        "zps": np.array([3], np.uint8),
    }
    (got,) = session.run(None, feeds)
    np.testing.assert_array_equal(got, np.array([[3, 4, 5], [1, 7, 9]], np.uint8))
    assert counting.runs == ["before", "after"]
    # The python backend's after_run raises what its kernels recorded (a zero scale here).
    with pytest.raises(KernelError, match=r"\[rule scale-value\]"):
        session.run(None, {**feeds, "scales": np.array([0.0], np.float32)})


# -- no name tests outside backends/ --------------------------------------------------------------


def _backend_name_tests(source: str, names: tuple[str, ...]) -> list[str]:
    """Comparisons of a value with a backend's name (``x == "onednn"``, ``x in ("native",
    ...)``, ``case "python":``), as source text. A comparison of an ``arithmetic`` is not one:
    the arithmetics share the name "onednn" with a backend."""

    def named(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(element) for element in node.elts)
        return False

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            others = [ast.unparse(o) for o in operands if not named(o)]
            if any(named(o) for o in operands) and not any("arithmetic" in o for o in others):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.MatchValue) and named(node.value):
            found.append(f"case {ast.unparse(node.value)}")
    return found


def test_the_check_finds_name_tests() -> None:
    source = (
        'if backend == "python": pass\n'
        'if b in ("native", "other"): pass\n'
        'match b:\n    case "onednn": pass\n'
        'if arithmetic == "onednn": pass\n'  # an arithmetic, not a backend
        'if x == "numpy": pass\n'
    )
    assert _backend_name_tests(source, backends.names()) == [
        "backend == 'python'",
        "b in ('native', 'other')",
        "case 'onednn'",
    ]


def test_no_module_outside_backends_tests_a_backend_name() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "backends":
            continue
        tests = _backend_name_tests(path.read_text(encoding="utf-8"), backends.names())
        if tests:
            found[str(relative)] = tests
    assert found == {}, "ask the backend object (quantgraph.backends.get(name)) instead"


def test_a_subclass_run_is_called_on_every_backend() -> None:
    """The session hands callers onnxruntime's own run where its backend needs nothing around a
    run; a subclass that overrides run keeps its own on every backend."""
    calls: list[str] = []

    class Logged(quantgraph.InferenceSession):
        def run(self, *args: Any, **kwargs: Any) -> list[Any]:
            calls.append(self.backend)
            return super().run(*args, **kwargs)

    model = ROOT / "models" / "cnn_u8.onnx"
    feeds = {"input": np.zeros((1, 3, 16, 16), np.float32)}
    for backend in ("native", "python"):
        Logged(quantgraph.convert(model).proto, backend).run(None, feeds)
    assert calls == ["native", "python"]
