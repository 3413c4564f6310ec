"""Writing a user's files without losing any: the one rule of every writer of the project.

Every writer (`python -m effectors.run`, `jaxsim.results.to_zarr`, `effectors.save_setup`,
`effectors.write_vizard`, `jaxsim.animation.save_animation`, the demo's figure) goes through
`replace_safely`:

1. an existing file or folder at the target is refused, naming it, unless the caller gave its
   explicit flag (`overwrite=True`, `--overwrite`); nothing is written then;
2. the output is written under a temporary name next to the target (same folder, same suffix, so
   that writers choosing a format by the suffix choose the same one);
3. only a complete output is moved into place (`os.replace` for a file; for a folder, the old one
   is moved aside, the new one renamed in, then the old one removed); a writer that fails leaves
   the earlier output as it was and removes its temporary file.
"""

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path


def check_flag(where: str, name: str, value) -> bool:
    """`value` if it is a bool, else a ValueError naming the argument."""
    if not isinstance(value, bool):
        raise ValueError(f"{where}: `{name}` must be True or False; got {value!r:.60}.")
    return value


def refuse_existing(
    path: str | os.PathLike, overwrite: bool, where: str, flag: str = "`overwrite=True`"
) -> None:
    """A `FileExistsError` naming `path` if it exists and `overwrite` is False (a ValueError if
    `overwrite` is not a bool); `where` (the writer) and `flag` (how to allow it) name them."""
    check_flag(where, "overwrite" if flag.startswith("`") else flag, overwrite)
    path = Path(path)
    if not overwrite and (path.exists() or path.is_symlink()):
        kind = "folder" if path.is_dir() else "file"
        raise FileExistsError(
            f"{where}: the {kind} {str(path)!r} exists; nothing was written (give {flag} to "
            "replace it)."
        )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


def _temporary(path: Path, what: str) -> Path:
    return path.with_name(f".{path.stem}.{what}-{os.getpid()}-{uuid.uuid4().hex[:8]}{path.suffix}")


@contextlib.contextmanager
def replace_safely(
    path: str | os.PathLike, *, overwrite: bool, where: str, flag: str = "`overwrite=True`"
) -> Iterator[Path]:
    """Yield a temporary path next to `path` to write the output to; when the block ends without
    an exception, move it into place (replacing an existing `path` only with `overwrite`); on an
    exception, remove it and leave `path` as it was. See the module docstring."""
    path = Path(path)
    refuse_existing(path, overwrite, where, flag)
    tmp = _temporary(path, "tmp")
    try:
        yield tmp
        if not (tmp.exists() or tmp.is_symlink()):
            raise FileNotFoundError(f"{where}: the writer wrote nothing to {str(tmp)!r}.")
        refuse_existing(path, overwrite, where, flag)  # created meanwhile
        if not (path.exists() or path.is_symlink()):
            os.rename(tmp, path)
        elif not tmp.is_dir() and not path.is_dir():
            os.replace(tmp, path)  # atomic for a file
        else:
            old = _temporary(path, "old")
            os.rename(path, old)
            try:
                os.rename(tmp, path)
            except OSError:
                os.rename(old, path)  # the earlier output back in place
                raise
            _remove(old)
    finally:
        _remove(tmp)
