"""mkdocs hook: serve MathJax from the built site instead of a CDN, so the docs render their
mathematics offline. The MathJax 3 files come from the ``django-static-mathjax`` package (in the
``docs`` extra; it is the MathJax distribution as a plain Python package named ``mathjax``, without
Django or any server), and the browser build with its fonts is copied into
``site/javascripts/mathjax/`` after the build."""

from __future__ import annotations

import os
import shutil

#: What the pages load: the TeX-input, CommonHTML-output component and the files it fetches.
KEEP = ("tex-chtml.js", "input", "output", "a11y", "ui", "adaptors", "sre")


def mathjax_dir() -> str:
    """The MathJax 3 browser build (``es5/``) of the installed ``mathjax`` package."""
    import mathjax

    return os.path.join(os.path.dirname(mathjax.__file__), "static", "mathjax", "es5")


def on_post_build(config, **kwargs):
    src = mathjax_dir()
    dst = os.path.join(config["site_dir"], "javascripts", "mathjax")
    os.makedirs(dst, exist_ok=True)
    for name in KEEP:
        path = os.path.join(src, name)
        if os.path.isdir(path):
            shutil.copytree(path, os.path.join(dst, name), dirs_exist_ok=True)
        elif os.path.exists(path):
            shutil.copy2(path, dst)
