"""Execute the notebooks of `notebooks/` and save them in place with their outputs.

The notebooks are committed with their outputs (text and PNG figures) so that the documentation
site shows results without executing anything (`mkdocs build` renders them as committed).
`tests/test_notebooks.py` executes each notebook again and fails when the committed outputs are
stale: a code cell whose figures or printed output appear or disappear, a notebook over
`MAX_NOTEBOOK_BYTES`, or execution metadata left in. Refresh them after changing a notebook:

    python docs/execute_notebooks.py                 # every notebook
    python docs/execute_notebooks.py 01_quickstart   # some of them (names with or without .ipynb)

Needs the `notebooks` extra, plus `crossval` (Basilisk) and `mujoco` for the notebooks that list
them in `metadata["jaxsim"]["requires"]`. Each notebook runs in a fresh `python3` kernel (this
interpreter) with `notebooks/` as its working directory. This file is excluded from the site
(`exclude_docs` in mkdocs.yml).
"""

import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"
# Limit per notebook and per cell [s]: each notebook is sized to run in < 60 s on a 2-core CPU; the
# margin covers kernel start-up and compilation on a loaded machine.
TIMEOUT_S = 300
# Size limit of a committed notebook [bytes]: its figures are PNGs at the inline backend's default
# resolution reduced to a 256-colour palette (`compress_png`), 10 to 60 kB each; the limit keeps
# the repository and the pages light.
MAX_NOTEBOOK_BYTES = 600_000
# Colours of the palette the committed figures are reduced to: line plots on white keep their look
# (anti-aliased edges included) at a third of the size of the full-colour PNG.
PNG_COLORS = 256
# Keys of cell metadata written by front ends and executors (timings, UI state): never committed.
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")
TEXT_OUTPUTS = ("stream", "execute_result", "display_data")


def execute(nb):
    """Execute notebook `nb` (an `nbformat` node) in place in a fresh kernel; returns it."""
    from nbclient import NotebookClient

    NotebookClient(
        nb,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
        allow_errors=False,
    ).execute()
    return nb


def compress_png(encoded: str) -> str:
    """A base64 PNG reduced to a `PNG_COLORS`-colour palette over white (base64 again); a PNG that
    already has a palette is returned as is."""
    import base64
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(encoded)))
    if image.mode == "P":
        return encoded
    rgba = image.convert("RGBA")
    flat = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    flat.alpha_composite(rgba)
    palette = flat.convert("RGB").quantize(
        colors=PNG_COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    buffer = io.BytesIO()
    palette.save(buffer, "PNG", optimize=True)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def normalize(nb):
    """Strip what changes from run to run but is not a result (execution timings, UI state,
    interpreter version, output to stderr) from `nb` and reduce its figures to palette PNGs, in
    place; returns it."""
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if "outputs" in cell:  # progress bars and warnings on stderr are not results
            cell.outputs = [
                out
                for out in cell.outputs
                if not (out.get("output_type") == "stream" and out.get("name") == "stderr")
            ]
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" in data:
                data["image/png"] = compress_png(data["image/png"])
    nb.metadata.pop("widgets", None)
    info = nb.metadata.get("language_info")
    if info is not None:
        nb.metadata["language_info"] = {"name": info.get("name", "python")}
    return nb


def _is_image(out) -> bool:
    return any(mime.startswith("image/") for mime in out.get("data", {}))


def output_signature(nb) -> list[tuple[int, bool]]:
    """Per code cell: (number of images, whether it shows text: printed output or a value).

    Output to stderr (warnings, progress) is not counted. Two runs of a notebook have equal
    signatures even though their numbers and timings differ; a committed copy whose signature
    differs from a fresh run's is stale."""
    signature = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = cell.get("outputs", [])
        images = sum(1 for out in outputs if _is_image(out))
        text = any(
            out.get("output_type") in TEXT_OUTPUTS
            and out.get("name", "stdout") != "stderr"
            and ("text" in out or "text/plain" in out.get("data", {}))
            and not _is_image(out)
            for out in outputs
        )
        signature.append((images, text))
    return signature


def refresh(path: Path) -> tuple[float, int]:
    """Execute the notebook at `path` and write it back with its outputs; returns (seconds, bytes)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    execute(nb)
    elapsed = time.perf_counter() - start
    nbformat.write(normalize(nb), path)
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise SystemExit(
            f"{path.name}: {size} bytes > {MAX_NOTEBOOK_BYTES}: make its figures smaller"
        )
    return elapsed, size


def main(argv: list[str]) -> None:
    names = [name.removesuffix(".ipynb") for name in argv]
    paths = [NOTEBOOKS_DIR / f"{name}.ipynb" for name in names] or sorted(
        NOTEBOOKS_DIR.glob("*.ipynb")
    )
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"no notebook {path}")
        elapsed, size = refresh(path)
        print(f"{path.name}: executed in {elapsed:.1f} s, {size / 1e3:.0f} kB")


if __name__ == "__main__":
    main(sys.argv[1:])
