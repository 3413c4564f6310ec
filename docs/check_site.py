"""Check a built documentation site: `python docs/check_site.py <site_dir>` (after `mkdocs build`).

Fails (exit status 1, one line per problem) unless
- every notebook of `notebooks/` has its page, showing at least as many images as the committed
  notebook has image outputs (at least one): the outputs are rendered, not just the code;
- every figure of `docs/figures/` is on the site and shown by at least one page;
- no page loads a script from another host (MathJax included: it is served from the site), and
  every page with maths loads the site's MathJax;
- the text of the guide and API pages names no private module (`jaxsim._x`, `effectors._x`): the
  pages point to public names (links whose hover title names the defining module do not count);
- the prose of the guide and API pages shows no unrendered maths: every `$...$` and `$$...$$` of
  the sources was recognised by `pymdownx.arithmatex` (a `$$...$$` inside a paragraph, without
  blank lines around it, is not: it rendered inline with literal dollar signs). Code, and the
  notebooks' pages (MathJax typesets their `$` maths itself), are not prose.

CI runs it after `mkdocs build --strict` (.ci/run); `tests/test_docs.py` builds the site and runs it
when the `docs` extra is installed. This file is excluded from the site (`exclude_docs`).
"""

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
MATHJAX = "javascripts/mathjax/tex-chtml-full.js"
PRIVATE = re.compile(r"\b(?:jaxsim|effectors)(?:\.[A-Za-z]\w*)*\._[A-Za-z]\w*")
# Maths left as text in the prose, where `MATH` stands for a maths element arithmatex recognised:
# `$$`; a `$` next to a maths element (a `$$...$$` inside a paragraph becomes `$` + inline maths +
# `$`); a `$<TeX>$` with a backslash command, `^`, `_` or `{` inside.
MATH = "\x00"
UNRENDERED = re.compile(r"\$\$|\$\s*\x00|\x00\s*\$|\$[^$\s\x00][^$\x00]*?[\\^_{][^$\x00]*?\$")


class _Page(HTMLParser):
    """The images, script sources and visible text (outside <script>/<style>) of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.images, self.scripts, self.text, self.prose = 0, [], [], []
        self._hidden = 0
        self._code = 0  # inside <code> or <pre>
        self._math: list[str] = []  # open tags of arithmatex elements (their maths is typeset)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images += 1
        if tag == "script" and attrs.get("src"):
            self.scripts.append(attrs["src"])
        if tag in ("script", "style"):
            self._hidden += 1
        if tag in ("code", "pre"):
            self._code += 1
        if (
            "arithmatex" in (attrs.get("class") or "").split()
            or self._math
            and tag == self._math[0]
        ):
            if not self._math and not self._hidden:
                self.prose.append(MATH)
            self._math.append(tag)

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._hidden:
            self._hidden -= 1
        if tag in ("code", "pre") and self._code:
            self._code -= 1
        if self._math and tag == self._math[-1]:
            self._math.pop()

    def handle_data(self, data):
        if not self._hidden:
            self.text.append(data)
            if not self._code and not self._math:
                self.prose.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _image_outputs(notebook: Path) -> int:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum(
        1
        for cell in cells
        for out in cell.get("outputs", [])
        if any(mime.startswith("image/") for mime in out.get("data", {}))
    )


def check(site: Path) -> list[str]:
    """The problems found in the site built at `site` (empty: all good)."""
    problems = []
    pages = {path: _parse(path) for path in sorted(site.rglob("*.html"))}
    if not pages:
        return [f"{site}: no HTML page (build the site first)"]

    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        html = site / "notebooks" / notebook.stem / "index.html"
        if html not in pages:
            problems.append(f"{notebook.name}: no page {html.relative_to(site)}")
            continue
        expected = max(1, _image_outputs(notebook))
        if pages[html].images < expected:
            problems.append(
                f"{html.relative_to(site)}: {pages[html].images} images, the notebook has "
                f"{expected} (commit it with its outputs: python docs/execute_notebooks.py)"
            )

    raw = {path: path.read_text(encoding="utf-8") for path in pages}
    for figure in sorted((ROOT / "docs" / "figures").glob("*.png")):
        if not (site / "figures" / figure.name).is_file():
            problems.append(f"docs/figures/{figure.name}: not on the site")
        elif not any(f"figures/{figure.name}" in text for text in raw.values()):
            problems.append(f"docs/figures/{figure.name}: no page shows it")

    if not (site / MATHJAX).is_file():
        problems.append(f"{MATHJAX}: not on the site")
    for path, page in pages.items():
        name = path.relative_to(site)
        remote = [src for src in page.scripts if re.match(r"^(https?:)?//", src)]
        if remote:
            problems.append(f"{name}: scripts from another host {remote}")
        has_maths = 'class="arithmatex"' in raw[path] or "jp-MarkdownOutput" in raw[path]
        if has_maths and not any(src.endswith(MATHJAX) for src in page.scripts):
            problems.append(f"{name}: has maths but does not load {MATHJAX}")
        if name.parts[0] not in ("notebooks", "search", "assets", "javascripts"):
            private = sorted(set(PRIVATE.findall(" ".join(page.text))))
            if private:
                problems.append(f"{name}: names private modules {private}")
            prose = "".join(page.prose)
            unrendered = [
                prose[max(0, m.start() - 30) : m.end() + 30].replace(MATH, "<maths>")
                for m in UNRENDERED.finditer(prose)
            ]
            if unrendered:
                shown = ", ".join(repr(" ".join(u.split())) for u in unrendered[:3])
                problems.append(
                    f"{name}: unrendered maths {shown} (a `$$...$$` needs blank lines around it)"
                )
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    problems = check(Path(argv[0]))
    for line in problems:
        print(line)
    print(f"{argv[0]}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
