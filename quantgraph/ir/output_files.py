"""Writing output files so that no user's file is ever lost.

* Nothing is written over an input: the same file is recognised by device and inode, whatever
  the spelling of its path (relative, absolute, ``./``, a symbolic or a hard link).
* Only regular files are replaced: a directory, device node, FIFO, socket or symbolic link at
  an output path is refused, with or without ``force``; so is a read-only file (a deliberate
  protection ``force`` does not override: make it writable first).
* Writes are exclusive unless ``force``: every file is first written complete into a private
  temporary folder beside OUT (same file system), then published with ``os.link``, which fails
  atomically when the name exists: of two writers racing for one OUT exactly one wins. With
  ``force``, ``os.replace`` (atomic too) after checking again what it replaces.
* Errors name OUT, never the temporary names; after any failure or interruption the temporary
  folder, files published by this write and folders it created are gone. They spell the
  option that replaces a file as the caller does: ``force=True`` in Python, ``--force`` where
  the command line set :func:`force_spelled`.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ModelError

# os.link is refused on some file systems (vfat, some FUSE ones): publish through O_EXCL then.
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV}
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


_FORCE = contextvars.ContextVar("quantgraph_force_spelling", default="force=True")


@contextlib.contextmanager
def force_spelled(option: str) -> Iterator[None]:
    """Inside the block, errors name ``option`` (the command line's "--force") as what
    replaces a file."""
    token = _FORCE.set(option)
    try:
        yield
    finally:
        _FORCE.reset(token)


def _exists(path: Path) -> ModelError:
    return ModelError(f"{path}: already exists (use {_FORCE.get()} to replace it)")


def identities(paths: Iterable[Path]) -> dict[tuple[int, int], Path]:
    """(device, inode) of each existing file among ``paths`` (links followed)."""
    found: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        found[(info.st_dev, info.st_ino)] = Path(path)
    return found


def check_output(
    path: Path,
    *,
    force: bool,
    protect: Iterable[Path] = (),
    external_data: str = "auto",
    role: str = "OUT",
) -> None:
    """Refuse (one-line :class:`ModelError` naming ``path`` and the rule) an output path that
    is an input, is not a regular file, exists without ``force``, or is read-only, and an
    ``external_data`` file name that is not a plain name ("auto" and "none" are no names):
    before any work; writing checks again. So is a path whose folder cannot be written in."""
    _check(Path(path), force, identities(protect), role)
    _check_folder(Path(path), role)
    if external_data not in ("auto", "none"):
        check_data_name(external_data, Path(path))


def _check(path: Path, force: bool, inputs: dict[tuple[int, int], Path], role: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise ModelError(f"{path}: cannot write {role} ({error.strerror})") from None
    try:
        followed = os.stat(path)
    except OSError:
        followed = info
    same = inputs.get((followed.st_dev, followed.st_ino))
    if same is not None:
        spelled = "" if same == path else f" (the same file as {same})"
        raise ModelError(
            f"{path}: {role} is an input file{spelled}; quantgraph never writes over its input"
        )
    for test, kind in _KINDS:
        if test(info.st_mode):
            raise ModelError(
                f"{path}: {role} is {kind}; quantgraph writes and replaces only regular files"
            )
    if not force:
        raise _exists(path)
    if not info.st_mode & 0o222 or not os.access(path, os.W_OK):
        raise ModelError(
            f"{path}: {role} is read-only; {_FORCE.get()} does not replace a write-protected file "
            "(make it writable first)"
        )


def _check_folder(path: Path, role: str) -> None:
    """The folder OUT goes in (its nearest existing ancestor: writing creates the rest) must
    be a folder this process may write in."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ModelError(f"{path}: cannot write {role} ({folder} is not a directory)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ModelError(f"{path}: cannot write {role} (no permission to write in {folder})")


def check_data_name(name: str, out: Path) -> None:
    """An external-data file name must be a plain file name beside OUT (not OUT itself)."""
    if not name or name.strip() != name:
        raise ModelError(f"{out}: external data file name {name!r} is empty or blank-padded")
    if (
        name in (".", "..")
        or os.sep in name
        or (os.altsep is not None and os.altsep in name)
        or Path(name).is_absolute()
    ):
        raise ModelError(
            f"{out}: external data file {name!r} must be a plain file name: it is written "
            "beside OUT (no folders, no '..')"
        )
    if name == out.name:
        raise ModelError(f"{out}: external data file {name!r} is OUT itself")


def write_files(
    target: Path,
    write: Callable[[Path], None],
    *,
    force: bool,
    protect: Iterable[Path] = (),
    companions: Sequence[str] = (),
    role: str = "OUT",
) -> Path:
    """Write OUT (``target``) and its ``companions`` (file names beside it, e.g. its external
    data) as the module docstring says. ``write(staged)`` writes OUT as ``staged``, a path
    with OUT's name in the private folder, and the companions beside it."""
    target = Path(target)
    inputs = identities(protect)
    data = [(target.parent / name, "external data file") for name in companions]
    finals = [(target, role), *data]
    for final, kind in finals:
        _check(final, force, inputs, kind)
    made = _make_folders(target)
    published: list[Path] = []
    scratch: Path | None = None
    try:
        try:
            scratch = Path(
                tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            )
        except OSError as error:
            raise ModelError(f"{target}: cannot write {role} ({error.strerror})") from None
        staged = scratch / target.name
        try:
            write(staged)
        except OSError as error:
            reason = error.strerror or _hide(error, scratch, target)
            raise ModelError(f"{target}: cannot write {role} ({reason})") from None
        except Exception as error:
            raise ModelError(f"{target}: {_hide(error, scratch, target)}") from error
        if force:  # all still replaceable? (before replacing any: no OUT left half-new)
            for final, kind in finals:
                _check(final, True, inputs, kind)
        # Companions first: OUT appears only once everything it refers to is in place.
        for final, kind in reversed(finals):
            _publish(scratch / final.name, final, force, inputs, kind)
            published.append(final)
    except BaseException:
        if not force:  # exclusively created by this write: nobody else's
            for path in published:
                path.unlink(missing_ok=True)
        _remove_scratch(scratch)
        for folder in made:
            _remove_empty(folder)
        raise
    _remove_scratch(scratch)
    return target


def _remove_scratch(scratch: Path | None) -> None:
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


def write_npz(
    path: Path,
    arrays: Mapping[str, Any],
    *,
    force: bool,
    protect: Iterable[Path] = (),
    role: str = "OUT",
) -> Path:
    """``arrays`` as an .npz at ``path`` (the name as given: np.savez would append ".npz")."""
    import numpy as np

    def write(staged: Path) -> None:
        with open(staged, "wb") as stream:
            np.savez(stream, **arrays)

    return write_files(Path(path), write, force=force, protect=protect, role=role)


def _publish(
    staged: Path, final: Path, force: bool, inputs: dict[tuple[int, int], Path], role: str
) -> None:
    if force:
        _check(final, True, inputs, role)  # again: what we replace must still be replaceable
        try:
            os.replace(staged, final)
        except OSError as error:
            raise ModelError(f"{final}: cannot write ({error.strerror})") from None
        return
    try:
        os.link(staged, final)
        return
    except FileExistsError:
        raise _exists(final) from None
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise ModelError(f"{final}: cannot write ({error.strerror})") from None
    try:  # no hard links here: claim the name exclusively, then move the file onto the claim
        os.close(os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        raise _exists(final) from None
    except OSError as error:
        raise ModelError(f"{final}: cannot write ({error.strerror})") from None
    os.replace(staged, final)


def _make_folders(target: Path) -> list[Path]:
    """Create OUT's missing parent folders; the ones created, deepest first."""
    missing = []
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        for made in missing:
            _remove_empty(made)
        raise ModelError(f"{target}: cannot create its folder ({error.strerror})") from None
    return missing


def _remove_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: not only ours
        folder.rmdir()


def _hide(error: BaseException, scratch: Path, target: Path) -> str:
    """The error's first line, naming OUT where it named the temporary file."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line.replace(str(scratch / target.name), str(target)).replace(
        str(scratch), str(target.parent)
    )
