"""MkDocs hook: adds the notebooks of `notebooks/` to the site as `notebooks/<name>.ipynb`.

Each notebook is taken from `$JAXSIM_EXECUTED_NOTEBOOKS/<name>.ipynb` when that file exists (the
executed copy with its outputs, written by `tests/test_notebooks.py` when the variable is set), else
from `notebooks/` as committed. mkdocs-jupyter renders them without executing them. This file is
excluded from the site (`exclude_docs` in mkdocs.yml).
"""

import os
import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File


ROOT = Path(__file__).resolve().parents[1]
ENV = "JAXSIM_EXECUTED_NOTEBOOKS"
_STAGES = []  # staging folders of this process's builds, removed after each build


def notebook_sources() -> dict[str, Path]:
    """`{name: path}` of the notebook each page is rendered from (executed copy if present)."""
    executed = Path(os.environ[ENV]) if os.environ.get(ENV) else None
    sources = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        copy = executed / path.name if executed is not None else None
        sources[path.name] = copy if copy is not None and copy.is_file() else path
    return sources


# Before the plugins' on_files (priority 0), so that mkdocs-jupyter sees the notebooks. The
# notebooks are staged as <tmp>/notebooks/<name> with src_dir=<tmp>: mkdocs-jupyter's file wrapper
# finds a source path only through `src_dir`, which a `File.generated` file lacks.
@event_priority(100)
def on_files(files, config):
    stage = Path(tempfile.mkdtemp(prefix="jaxsim-docs-"))
    _STAGES.append(stage)
    (stage / "notebooks").mkdir()
    for name, path in notebook_sources().items():
        shutil.copyfile(path, stage / "notebooks" / name)
        files.append(
            File(
                f"notebooks/{name}",
                src_dir=str(stage),
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
            )
        )
    return files


def on_post_build(config):
    while _STAGES:
        shutil.rmtree(_STAGES.pop(), ignore_errors=True)
