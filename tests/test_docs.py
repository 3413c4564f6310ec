"""The documentation: the guides' code runs as written, the site renders the committed notebooks
(`docs/hooks.py`). `mkdocs build --strict` itself runs in CI (.ci/run)."""

import importlib.util
import re
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
# Guides whose ```python blocks run as written, top to bottom in one namespace, with their checks.
GUIDES = [
    "getting_started.md",
    "writing_an_effector.md",
    "thrusters.md",
    "variable_mass.md",
    "environment.md",
    "results_and_setups.md",
    "controls.md",
    "free_time.md",
    "trajectory_optimization.md",
    "extending.md",
    "gnc.md",
]
_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_code_runs(guide):
    pytest.importorskip("matplotlib")
    pytest.importorskip("xarray")
    import matplotlib.pyplot as plt

    blocks = _BLOCK.findall((ROOT / "docs" / guide).read_text(encoding="utf-8"))
    assert blocks, f"docs/{guide} has no python block"
    try:
        namespace = {"__name__": "__doc__"}
        for i, code in enumerate(blocks):
            exec(compile(code, f"docs/{guide} python block {i}", "exec"), namespace)
    finally:
        plt.close("all")


def test_guides_in_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert pages and all(page in nav for page in pages), pages


@pytest.mark.parametrize("package", ["jaxsim", "effectors"])
def test_api_reference_lists_every_public_name(package):
    """Each public class and function the package re-exports has a `::: package.Name` entry in
    docs/api/ (modules are documented on their own pages)."""
    import importlib
    import inspect

    module = importlib.import_module(package)
    api = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "api").glob("*.md"))
    public = {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj))
    }
    # Another name of a listed object (`jaxsim.HybridSolution` is `jaxsim.Solution`) renders once,
    # under its own name; the page says the alias exists.
    aliases = {
        name: obj.__name__
        for name, obj in public.items()
        if obj.__name__ != name and public.get(obj.__name__) is obj
    }
    names = [name for name in public if name not in aliases]
    assert names
    missing = [name for name in names if f"::: {package}.{name}\n" not in api]
    assert not missing, f"not in docs/api/*.md: {missing}"
    unexplained = [name for name in aliases if f"`{package}.{name}`" not in api]
    assert not unexplained, f"aliases not mentioned in docs/api/*.md: {unexplained}"


def _hooks():
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_notebooks_are_the_committed_ones():
    """The site renders the notebooks as committed (with their outputs), every one of them."""
    hooks = _hooks()
    committed = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert hooks.notebook_sources() == {p.name: p for p in committed}


def _check_site():
    spec = importlib.util.spec_from_file_location("check_site", ROOT / "docs" / "check_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_site_check_catches_pages_without_results(tmp_path):
    """`docs/check_site.py` fails a site whose notebook pages show no image, that loads a script
    from a CDN, or whose API text names a private module."""
    check_site = _check_site()
    notebook = sorted((ROOT / "notebooks").glob("*.ipynb"))[0].stem
    page = tmp_path / "notebooks" / notebook / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html><body><pre>In [ ]:</pre></body></html>", encoding="utf-8")
    api = tmp_path / "api" / "jaxsim" / "index.html"
    api.parent.mkdir(parents=True)
    api.write_text(
        '<html><head><script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js">'
        "</script></head><body><p>see <code>jaxsim._route</code></p>"
        '<a title="jaxsim.RK4 (jaxsim._solvers._ode.RK4)">RK4</a></body></html>',
        encoding="utf-8",
    )
    problems = "\n".join(check_site.check(tmp_path))
    assert f"notebooks/{notebook}/index.html: 0 images" in problems
    assert "scripts from another host" in problems
    assert "jaxsim._route" in problems
    assert "jaxsim._solvers._ode" not in problems  # a link's hover title is not page text
    assert check_site.MATHJAX in problems  # the site's MathJax is missing


def test_site_check_catches_unrendered_maths(tmp_path):
    """A `$$...$$` inside a paragraph (no blank lines around it) rendered inline with literal
    dollar signs on five pages, and `mkdocs build --strict` passed: `check_site` fails it now.
    Dollars in code and typeset maths are not flagged."""
    check_site = _check_site()
    guide = tmp_path / "environment" / "index.html"
    guide.parent.mkdir(parents=True)
    guide.write_text(
        '<html><body><p>Over the record <span class="arithmatex">\\([t_k, t_k + \\Delta]\\)'
        '</span>,\n$<span class="arithmatex">\\(\\mathbf x(t) = 1\\)</span>$\nevaluated</p>'
        "</body></html>",
        encoding="utf-8",
    )
    clean = tmp_path / "thrusters" / "index.html"
    clean.parent.mkdir(parents=True)
    clean.write_text(
        '<html><body><p>fires iff</p><div class="arithmatex">\\[T_i > 0\\]</div>'
        "<pre><code>$ echo $HOME_x</code></pre><p>costs $5</p></body></html>",
        encoding="utf-8",
    )
    api = tmp_path / "api" / "x" / "index.html"
    api.parent.mkdir(parents=True)
    api.write_text("<html><body><p>is $$a_{k}$$ here</p></body></html>", encoding="utf-8")
    problems = check_site.check(tmp_path)
    flagged = {line.split(":")[0] for line in problems if "unrendered maths" in line}
    assert flagged == {"environment/index.html", "api/x/index.html"}, problems


def test_readme_and_getting_started_give_the_same_first_install_command():
    """A new user met two different first install commands."""

    def first_bash(path):
        return re.search(r"```bash\n(.*?)\n", path.read_text(encoding="utf-8")).group(1)

    assert first_bash(ROOT / "README.md") == first_bash(ROOT / "docs" / "getting_started.md")


@pytest.mark.slow  # 12-30 s (the whole site); CI builds and checks it in its docs step (.ci/run)
def test_site_builds_and_shows_results(tmp_path):
    """`mkdocs build --strict` of the site as committed (a clean checkout builds it the same way),
    then `docs/check_site.py`: every notebook page shows its figures, the guides their figures,
    MathJax is served from the site, no page text names a private module."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocs_jupyter")
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    problems = _check_site().check(site)
    assert not problems, "\n".join(problems)
