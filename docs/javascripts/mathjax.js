// MathJax 2, served from the site itself (docs/hooks/local_mathjax.py copies it in): no CDN needed.
window.MathJax = {
  tex2jax: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true,
             processEnvironments: true, ignoreClass: ".*", processClass: "arithmatex" },
  "HTML-CSS": { fonts: ["TeX"] },
  messageStyle: "none"
};
document$.subscribe(function () {
  if (window.MathJax && window.MathJax.Hub) { window.MathJax.Hub.Queue(["Typeset", window.MathJax.Hub]); }
});
