"""Writing OUT never loses a user's file (issue 20, items 1-4): never over an input (the same
file by inode, whatever the spelling), only regular files replaced (FIFOs, devices, links,
directories refused with or without --force), exclusive unless --force (two racing writers: one
wins, the other gets a one-line error), external data only beside OUT, read-only files kept,
errors that name OUT, and nothing left behind by any failure or interruption."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner, Result

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import ModelError
from quantgraph.ir.output_files import check_output, write_files

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "models" / "cnn_u8.onnx"
TRANSFORMER = ROOT / "models" / "transformer_s8.onnx"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(CNN, tmp_path / "cnn.onnx")
    return tmp_path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line_error(result: Result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("quantgraph: error:") and ".tmp" not in lines[0], lines[0]
    return lines[0]


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# -- never over an input -------------------------------------------------------------------------


def _spellings(work: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | Path]:
    source = work / "cnn.onnx"
    monkeypatch.chdir(work)
    (work / "link.onnx").symlink_to(source)
    os.link(source, work / "hard.onnx")
    return {
        "str": str(source),
        "path": source,
        "relative": "cnn.onnx",
        "dot": "./cnn.onnx",
        "dotdot": f"../{work.name}/cnn.onnx",
        "symlink": work / "link.onnx",
        "hardlink": work / "hard.onnx",
    }


@pytest.mark.parametrize("force", [False, True])
def test_save_never_writes_over_the_input(
    work: Path, monkeypatch: pytest.MonkeyPatch, force: bool
) -> None:
    source = work / "cnn.onnx"
    before = digest(source)
    result = quantgraph.convert(source)
    for name, spelled in _spellings(work, monkeypatch).items():
        with pytest.raises(ModelError, match="input") as caught:
            result.save(spelled, force=force)
        assert ".tmp" not in str(caught.value), name
        assert digest(source) == before, name
    assert os.stat(work / "hard.onnx").st_nlink == 2  # the hard link is still the input
    assert listing(work) == {"cnn.onnx", "link.onnx", "hard.onnx"}


def test_save_never_writes_over_an_input_read_through_an_ir_model(work: Path) -> None:
    from quantgraph.ir.model_files import load_model

    source = work / "cnn.onnx"
    before = digest(source)
    with pytest.raises(ModelError, match="input"):
        quantgraph.convert(load_model(source)).save(source, force=True)
    assert digest(source) == before


def test_cli_never_writes_over_the_input_whatever_the_spelling(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = work / "cnn.onnx"
    before = digest(source)
    for name, spelled in _spellings(work, monkeypatch).items():
        for command in ("convert", "lower"):
            line = one_line_error(cli(command, source, spelled, "--force"))
            assert "input" in line, (name, line)
    assert digest(source) == before


def test_save_does_not_replace_an_existing_file_by_default(work: Path) -> None:
    out = work / "o.onnx"
    out.write_bytes(b"keep me")
    result = quantgraph.convert(work / "cnn.onnx")
    with pytest.raises(ModelError, match=r"o\.onnx: already exists \(use force=True"):
        result.save(out)
    assert out.read_bytes() == b"keep me"
    result.save(out, force=True)
    onnx.checker.check_model(str(out), full_check=True)
    assert listing(work) == {"cnn.onnx", "o.onnx"}


# -- only regular files --------------------------------------------------------------------------


def _fifo(work: Path) -> Path:
    fifo = work / "pipe.onnx"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize("command", ["convert", "lower"])
@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
def test_a_fifo_or_a_link_to_one_is_never_replaced(
    work: Path, command: str, force: list[str]
) -> None:
    fifo = _fifo(work)
    link = work / "to_pipe.onnx"
    link.symlink_to(fifo)
    line = one_line_error(cli(command, work / "cnn.onnx", fifo, *force))
    assert "pipe.onnx: OUT is a FIFO; quantgraph writes and replaces only regular files" in line
    line = one_line_error(cli(command, work / "cnn.onnx", link, *force))
    assert "to_pipe.onnx: OUT is a symbolic link" in line
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.path.islink(link)
    assert listing(work) == {"cnn.onnx", "pipe.onnx", "to_pipe.onnx"}


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_a_device_is_refused_by_the_path_check(device: str) -> None:
    """Checked without writing (the tests run as root, where a wrong answer would replace the
    device node): the check every write goes through refuses it."""
    with pytest.raises(ModelError, match=rf"{device}: OUT is a character device"):
        check_output(Path(device), force=True)
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_cli_onto_a_device_fails_before_anything_could_replace_it(
    monkeypatch: pytest.MonkeyPatch, work: Path
) -> None:
    """The CLI end to end on /dev/null --force, with every way of replacing a file made to
    fail loudly: if the check were missing the test fails, and /dev/null stays untouched."""

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"tried to replace or link: {args}")

    monkeypatch.setattr(os, "replace", never)
    monkeypatch.setattr(os, "link", never)
    monkeypatch.setattr(os, "rename", never)
    line = one_line_error(cli("convert", work / "cnn.onnx", "/dev/null", "--force"))
    assert "/dev/null: OUT is a character device" in line
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_directory_is_refused(work: Path) -> None:
    (work / "dir.onnx").mkdir()
    line = one_line_error(cli("convert", work / "cnn.onnx", work / "dir.onnx", "--force"))
    assert "dir.onnx: OUT is a directory" in line


def test_a_symlink_to_a_regular_file_is_not_replaced(work: Path) -> None:
    """Replacing the link would silently cut it from its target: name the target instead."""
    target = work / "real.onnx"
    target.write_bytes(b"keep me")
    (work / "alias.onnx").symlink_to(target)
    line = one_line_error(cli("convert", work / "cnn.onnx", work / "alias.onnx", "--force"))
    assert "alias.onnx: OUT is a symbolic link" in line
    assert target.read_bytes() == b"keep me" and (work / "alias.onnx").is_symlink()


def test_force_onto_a_read_only_file_refuses(work: Path) -> None:
    out = work / "ro.onnx"
    out.write_bytes(b"keep me")
    out.chmod(0o444)
    line = one_line_error(cli("convert", work / "cnn.onnx", out, "--force"))
    assert "ro.onnx: OUT is read-only; --force does not replace a write-protected file" in line
    assert out.read_bytes() == b"keep me"
    out.chmod(0o644)
    assert cli("convert", work / "cnn.onnx", out, "--force").exit_code == 0


# -- exclusive writes ----------------------------------------------------------------------------


def test_a_writer_that_loses_the_race_fails_and_leaves_the_winner(work: Path) -> None:
    """OUT appears after the check, while this write runs (another writer won): os.link
    refuses atomically; the winner's file stays, and nothing of this write remains."""
    out = work / "o.onnx"

    def write(staged: Path) -> None:
        staged.write_bytes(b"mine")
        out.write_bytes(b"the winner")

    with pytest.raises(ModelError, match=r"o\.onnx: already exists \(use force=True"):
        write_files(out, write, force=False)
    assert out.read_bytes() == b"the winner"
    assert listing(work) == {"cnn.onnx", "o.onnx"}


def test_two_concurrent_writers_exactly_one_succeeds(work: Path) -> None:
    shutil.copy(TRANSFORMER, work / "transformer.onnx")
    out = work / "same.onnx"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(3):
        out.unlink(missing_ok=True)
        writers = [
            subprocess.Popen(
                [sys.executable, "-m", "quantgraph", "convert", work / name, out],
                cwd=work,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("cnn.onnx", "transformer.onnx")
        ]
        ended = [(w.wait(timeout=300), *w.communicate()) for w in writers]
        codes = sorted(code for code, _, _ in ended)
        assert codes == [0, 2], ended
        (loser,) = [err for code, _, err in ended if code == 2]
        assert loser.startswith("quantgraph: error:") and len(loser.strip().splitlines()) == 1
        assert "same.onnx: already exists (use --force to replace it)" in loser
        (winner,) = [w for w, (code, _, _) in zip(writers, ended, strict=True) if not code]
        assert isinstance(winner.args, list)  # the command as given: its source model at [4]
        assert onnx.load(str(out)).graph.name == onnx.load(str(winner.args[4])).graph.name
        assert listing(work) == {"cnn.onnx", "transformer.onnx", "same.onnx"}


# -- external data -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["../x.data", "sub/x.data", "/tmp/x.data", "..", ".", "", " ", "o.onnx"]
)
@pytest.mark.parametrize("command", ["convert", "lower"])
def test_external_data_must_be_a_plain_name_beside_out(work: Path, name: str, command: str) -> None:
    (work / "sub").mkdir()
    before = listing(work)
    line = one_line_error(cli(command, work / "cnn.onnx", work / "o.onnx", "--external-data", name))
    assert "o.onnx: external data file" in line
    assert listing(work) == before
    assert not Path("/tmp/x.data").exists() and not (work.parent / "x.data").exists()


def test_external_data_goes_beside_out_and_is_exclusive(work: Path) -> None:
    out = work / "o.onnx"
    assert cli("convert", work / "cnn.onnx", out, "--external-data", "w.data").exit_code == 0
    assert (work / "w.data").is_file()
    stored = onnx.load(str(out), load_external_data=False).graph.initializer
    assert any(t.external_data for t in stored)  # the big ones point into w.data
    (work / "x.data").write_bytes(b"keep me")
    line = one_line_error(
        cli("convert", work / "cnn.onnx", work / "p.onnx", "--external-data", "x.data")
    )
    assert "x.data: already exists (use --force" in line
    assert (work / "x.data").read_bytes() == b"keep me" and not (work / "p.onnx").exists()


# -- failures name OUT and leave nothing ---------------------------------------------------------


def test_a_failing_write_names_out_and_leaves_nothing(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import quantgraph.ir.model_files

    def full(path: Path, data: bytes) -> None:
        path.write_bytes(data[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(quantgraph.ir.model_files, "_write_bytes", full)
    out = work / "new" / "deeper" / "o.onnx"
    line = one_line_error(cli("convert", work / "cnn.onnx", out))
    assert line == f"quantgraph: error: {out}: cannot write OUT (No space left on device)"
    assert listing(work) == {"cnn.onnx"}  # no temp file, and the folders it made are gone


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit])
def test_an_interrupted_write_leaves_nothing(
    work: Path, monkeypatch: pytest.MonkeyPatch, interruption: type[BaseException]
) -> None:
    import quantgraph.ir.model_files

    def interrupted(path: Path, data: bytes) -> None:
        path.write_bytes(data[:10])
        raise interruption

    monkeypatch.setattr(quantgraph.ir.model_files, "_write_bytes", interrupted)
    with pytest.raises(interruption):
        quantgraph.convert(work / "cnn.onnx").save(work / "o.onnx")
    assert listing(work) == {"cnn.onnx"}


# -- convert --validate that fails: which model, and OUT kept (issue 21, item 1) -----------------


def test_convert_validate_failing_on_out_says_so_and_keeps_out(work: Path) -> None:
    import numpy as np
    from onnx import TensorProto

    from tests.builders import quantize_linear_model

    f8 = quantize_linear_model(
        (TensorProto.FLOAT, [2, 3]),
        np.array(0.5, np.float32),
        y_type=TensorProto.FLOAT8E4M3FN,
        output_dtype=TensorProto.FLOAT8E4M3FN,
        float_output=True,
        opset=21,
    )
    onnx.save(f8, str(work / "f8.onnx"))
    out = work / "o.onnx"
    line = one_line_error(
        cli("convert", work / "f8.onnx", out, "--validate", "--backend", "python")
    )
    assert line.startswith(f"quantgraph: error: --validate failed on OUT ({out}): python backend:")
    assert line.endswith(f"; {out} was written and is kept")
    onnx.checker.check_model(str(out), full_check=True)


def test_convert_validate_failing_on_in_says_so_and_keeps_out(work: Path) -> None:
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
        [
            helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]),
            helper.make_tensor("z", TensorProto.UINT8, [], [3]),
        ],
    )
    source = work / "reshape.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(source))
    out = work / "o.onnx"
    line = one_line_error(cli("convert", source, out, "--validate"))  # seed 0: shape [1, 21]
    assert line.startswith(f"quantgraph: error: --validate failed on IN ({source}): ")
    assert "the original model fails on the generated inputs" in line
    assert line.endswith(f"; {out} was written and is kept")
    assert out.is_file()


def test_convert_validate_that_disagrees_says_out_is_kept(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The converter does not make models that disagree: validation is pointed at a broken
    copy (its output's scale doubled) to see what convert prints then."""
    import numpy as np
    from onnx import numpy_helper

    import quantgraph.validation

    broken = quantgraph.convert(work / "cnn.onnx").proto
    (q_node,) = [n for n in broken.graph.node if n.name == "output_QuantizeLinear"]
    for index, tensor in enumerate(broken.graph.initializer):
        if tensor.name == q_node.input[1]:
            doubled = numpy_helper.to_array(tensor) * np.float32(2)
            broken.graph.initializer[index].CopyFrom(numpy_helper.from_array(doubled, tensor.name))
    real = quantgraph.validation.validate
    monkeypatch.setattr(
        quantgraph.validation, "validate", lambda original, _, **kw: real(original, broken, **kw)
    )
    out = work / "o.onnx"
    result = cli("convert", work / "cnn.onnx", out, "--validate")
    assert result.exit_code == 1, result.output
    assert result.stdout.strip().endswith(
        f"{out} was written and is kept, although the models disagree"
    )
    assert out.is_file()


# -- run --output --------------------------------------------------------------------------------


def test_run_output_is_exclusive_and_never_an_input(work: Path) -> None:
    import numpy as np

    source = work / "cnn.onnx"
    before = digest(source)
    np.savez(work / "in.npz", input=np.zeros((1, 3, 16, 16), np.float32))
    for bad in (source, work / "in.npz"):
        line = one_line_error(cli("run", source, "--inputs", work / "in.npz", "--output", bad))
        assert f"{bad}: --output is an input file" in line
    assert digest(source) == before
    out = work / "o.npz"
    assert cli("run", source, "--output", out).exit_code == 0
    line = one_line_error(cli("run", source, "--output", out))
    assert "o.npz: already exists (use --force" in line
    assert cli("run", source, "--output", out, "--force").exit_code == 0
    with np.load(out) as data:
        assert data.files == ["output"]
    fifo = _fifo(work)
    line = one_line_error(cli("run", source, "--output", fifo, "--force"))
    assert "pipe.onnx: --output is a FIFO" in line
    assert listing(work) == {"cnn.onnx", "in.npz", "o.npz", "pipe.onnx"}


# -- inputs with external data -------------------------------------------------------------------


def _external_model(work: Path) -> Path:
    model = onnx.load(str(work / "cnn.onnx"))
    onnx.save(
        model,
        str(work / "ext.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="ext.data",
        size_threshold=64,
    )
    return work / "ext.onnx"


def test_the_inputs_external_data_is_never_written(work: Path) -> None:
    source = _external_model(work)
    data = work / "ext.data"
    before = digest(data)
    result = quantgraph.convert(source)
    with pytest.raises(ModelError, match=r"ext\.data: external data file is an input file"):
        result.save(work / "o.onnx", external_data="ext.data", force=True)
    os.link(data, work / "alias.data")  # the same file under another name
    with pytest.raises(ModelError, match="is an input file"):
        result.save(work / "alias.onnx", force=True)  # auto: <OUT stem>.data = alias.data
    assert digest(data) == before
    assert listing(work) == {"cnn.onnx", "ext.onnx", "ext.data", "alias.data"}
    (work / "alias.data").unlink()  # onnx-ir refuses to read weights from a hard-linked file
    result.save(work / "o.onnx")  # auto: o.data beside it
    assert (work / "o.data").is_file()
    onnx.checker.check_model(str(work / "o.onnx"), full_check=True)


def test_an_unwritable_folder_names_out(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root no folder is unwritable: mkdtemp is made to fail as it would for a user."""
    import tempfile

    def denied(*args: object, **kwargs: object) -> str:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(work / ".o.onnx.x"))

    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    out = work / "o.onnx"
    with pytest.raises(ModelError) as caught:
        quantgraph.convert(work / "cnn.onnx").save(out, external_data="w.data")
    assert str(caught.value) == f"{out}: cannot write OUT (Permission denied)"
    assert listing(work) == {"cnn.onnx"}
