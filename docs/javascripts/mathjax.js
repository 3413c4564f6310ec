// MathJax 3 settings for the math that pymdownx.arithmatex (generic mode) wraps in
// <span class="arithmatex">\(...\)</span> and <div class="arithmatex">\[...\]</div>:
// typeset only those elements, nothing else on the page.
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]] },
  options: { ignoreHtmlClass: "tex2jax_ignore|.*", processHtmlClass: "arithmatex" },
};
