"""MkDocs hook: adds the notebooks of `notebooks/` to the site as `notebooks/<name>.ipynb`.

The notebooks are committed with their outputs (refreshed by `docs/execute_notebooks.py`, checked
fresh by `tests/test_notebooks.py`); mkdocs-jupyter renders them as committed, without executing
them. This file is excluded from the site (`exclude_docs` in mkdocs.yml).
"""

import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File


ROOT = Path(__file__).resolve().parents[1]
_STAGES = []  # staging folders of this process's builds, removed after each build


def notebook_sources() -> dict[str, Path]:
    """`{name: path}` of the notebooks the pages are rendered from."""
    return {path.name: path for path in sorted((ROOT / "notebooks").glob("*.ipynb"))}


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
