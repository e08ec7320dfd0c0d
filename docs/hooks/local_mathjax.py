"""mkdocs hook: serve MathJax from the built site instead of a CDN, so the docs render their
mathematics offline. The MathJax 2 files come from the ``jupyter-server-mathjax`` package (in the
``docs`` extra) and are copied into ``site/javascripts/mathjax/`` after the build."""

from __future__ import annotations

import os
import shutil


def on_post_build(config, **kwargs):
    import jupyter_server_mathjax

    src = os.path.join(os.path.dirname(jupyter_server_mathjax.__file__), "static")
    dst = os.path.join(config["site_dir"], "javascripts", "mathjax")
    shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.md", "*.txt"))
