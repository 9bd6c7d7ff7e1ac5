"""The committed C++ view of the spec is what the generator prints today."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from quantgraph.spec import (
    DEFAULT_QUANTIZED,
    DOMAIN,
    DST_FROM_ZPS,
    DYNAMIC_DEQUANTIZE,
    OPS,
    RULES,
    dst_type,
    dtypes,
)
from tools import gen_op_header as codegen

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / codegen.HEADER_PATH
SOURCES = ROOT / "custom_ops" / "src"

# What the generated header carries and the hand-written C++ must not define again.
HAND_DEFINED = {
    "an OpKind enum": re.compile(r"\benum\s+class\s+OpKind\b"),
    "a spec type constant": re.compile(
        r"\bconstexpr\s+int\s+k(F32|U8|S8|S32|E4M3|E5M2|F8E4M3|F8E5M2|S4|U4|F16|BF16)\s*="
    ),
    "an ONNX element type of the spec": re.compile(
        r"\bONNX_TENSOR_ELEMENT_DATA_TYPE_"
        r"(FLOAT|UINT8|INT8|INT32|FLOAT8E4M3FN|FLOAT8E5M2|INT4|UINT4|FLOAT16|BFLOAT16)\b"
    ),
    "a SpecError without a rule id": re.compile(r"\bSpecError\s*\([^;]*,\s*\"\"\s*\)"),
}


def test_committed_header_is_up_to_date() -> None:
    assert HEADER.is_file(), (
        f"{codegen.HEADER_PATH} is missing: run `python -m tools.gen_op_header --write`"
    )
    committed = HEADER.read_text()
    rendered = codegen.render()
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            rendered.splitlines(keepends=True),
            "committed",
            "generated",
            n=1,
        )
    )
    assert committed == rendered, (
        f"{codegen.HEADER_PATH} is stale: run `python -m tools.gen_op_header --write`\n"
        + diff[:4000]
    )


def test_render_is_deterministic_and_carries_the_spec() -> None:
    rendered = codegen.render()
    assert rendered == codegen.render()
    assert f'kDomain = "{DOMAIN}"' in rendered
    for name in OPS:
        assert f'k{name} = "{name}"' in rendered
    for rule_id in RULES:
        assert f'{{"{rule_id}", ' in rendered
    rows = [f"// {row.src.name} -> {row.dst.name}" for op in OPS.values() for row in op.type_rows]
    assert len(re.findall(r"^    \{.*\},  // \w+ -> \w+$", rendered, re.M)) == len(rows)
    for row in rows:
        assert row in rendered
    for op in OPS.values():  # each op's qtypes and attributes, in the spec's order
        qtypes = ", ".join(f'"{q}"' for q in op.qtypes)
        names = ", ".join(f'"{a.name}"' for a in op.attributes)
        assert f"{len(op.qtypes)}, {{{qtypes}}}, {len(op.attributes)}, {{{names}}}}}," in rendered


def test_main_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "sub" / "op_spec.h"
    assert codegen.main(["--write", str(target)]) == 0
    assert target.read_text() == codegen.render()
    assert codegen.main([]) == 0
    printed = capsys.readouterr().out
    assert codegen.render() in printed


def _hand_written_sources() -> list[Path]:
    generated = SOURCES / "common" / "generated"
    return sorted(
        path
        for path in SOURCES.rglob("*")
        if path.suffix in (".cc", ".h") and generated not in path.parents
    )


def test_sources_do_not_redefine_what_the_header_carries() -> None:
    sources = _hand_written_sources()
    assert SOURCES / "common" / "spec.h" in sources and SOURCES / "common" / "node.cc" in sources
    found = []
    for path in sources:
        text = path.read_text()
        for what, pattern in HAND_DEFINED.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {what}: {match.group(0)!r}")
    assert not found, "use the generated op_spec.h instead:\n" + "\n".join(found)


def test_header_carries_op_kinds_types_and_the_dst_rule() -> None:
    rendered = codegen.render()
    enum = re.search(r"enum class OpKind : int \{\n(.*?)\n\};", rendered, re.S)
    assert enum is not None
    assert enum.group(1).splitlines() == [f"  k{name} = {i}," for i, name in enumerate(OPS)]
    assert f"inline constexpr int kOpCount = {len(OPS)};" in rendered
    table = re.search(r"kOps\[kOpCount\] = \{\n(.*?)\n\};", rendered, re.S)
    assert table is not None
    rows = table.group(1).splitlines()
    assert len(rows) == len(OPS)
    for row, op in zip(rows, OPS.values(), strict=True):
        flags = f"{str(op.is_quantize).lower()}, {str(op.is_static).lower()}"
        assert row.startswith(f'    {{"{op.name}", {flags}, {len(op.inputs)}, ')
    for d in dtypes.ALL:
        constant = "k" + d.name.replace("_", "").upper()
        assert f"inline constexpr int {constant} = {d.onnx};" in rendered
    assert "inline constexpr int kF8E4M3 = " in rendered  # the naming rule, spelled out
    const = {d.onnx: codegen.type_constant(d) for d in dtypes.ALL}
    assert f"kDequantizedDst = {const[dst_type(DYNAMIC_DEQUANTIZE)]};" in rendered
    from_scales = [
        const[d.onnx] for d in dtypes.ALL if dst_type(DYNAMIC_DEQUANTIZE, scales=d.onnx) == d.onnx
    ]
    assert f"kDstFromScales[] = {{{', '.join(from_scales)}}};" in rendered
    for d in dtypes.ALL:  # bits, integer ranges
        qmin, qmax = d.int_range if d.is_integer else (0, 0)
        integer = str(d.is_integer).lower()
        assert f'{{{d.onnx}, "{d.name}", {d.bits}, {integer}, ' in rendered
        assert f"{qmin}LL, {qmax}LL" in rendered
    assert f"kDefaultQuantizedDst = {const[DEFAULT_QUANTIZED.onnx]};" in rendered
    zps = ", ".join(const[d.onnx] for d in DST_FROM_ZPS)
    assert f"kDstFromZps[] = {{{zps}}};" in rendered
    for op in OPS.values():
        for attribute in op.attributes:
            assert f'{{"{attribute.name}", "{attribute.kind}"}},' in rendered
