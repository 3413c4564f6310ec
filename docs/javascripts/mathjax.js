// MathJax 3 settings (MathJax itself is served from the site: javascripts/mathjax/, see its
// README.md). Typeset only
// - the maths that pymdownx.arithmatex (generic mode) wraps in <span class="arithmatex">\(...\)</span>
//   and <div class="arithmatex">\[...\]</div> (guides and API pages), and
// - the $...$ and $$...$$ maths of the notebooks' markdown cells (class jp-MarkdownOutput),
// not the rest of the page (prose, code, cell outputs: a "$" there stays a dollar sign).
window.MathJax = {
  startup: { elements: [".arithmatex", ".jp-MarkdownOutput"] },
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
  },
  options: { ignoreHtmlClass: "tex2jax_ignore" },
};
