"""Figure helpers: axes that show every point, titles wrapped outside formulas, a key for every group."""

from __future__ import annotations

import numpy as np

from ntpcert.report.plots import fit_ylim, subplots, suptitle


def test_fit_ylim_never_hides_a_point():
    fig, (a, b) = subplots(1, 2)
    early_negative = np.array([-50.0, -8.0, -1.0, 0.2, 0.9])
    fit_ylim(a, [early_negative, np.array([0.5])], 1.05)
    lo, hi = a.get_ylim()
    assert lo <= -50.0 and hi >= 1.05 and a.get_yscale() == "symlog"
    fit_ylim(b, [np.array([-0.4, 0.3, 0.99]), np.array([np.nan, 0.1])], 1.01)
    lo, hi = b.get_ylim()
    assert lo < -0.4 and hi >= 1.01 and b.get_yscale() == "linear"


def test_suptitle_wraps_but_never_inside_a_formula():
    fig, _ = subplots(1, 1, figsize=(3, 3))
    title = "paper: regularisation path " + r"$\hat W_B = \arg\min_{\|W\| \leq B} \mathrm{CE}(W)$" + " (Theorem 1) " * 3
    suptitle(fig, title)
    lines = fig._suptitle.get_text().split("\n")
    assert len(lines) > 1
    assert all(ln.count("$") % 2 == 0 for ln in lines)
    assert " ".join(lines).replace("  ", " ").strip() == " ".join(title.split())


def test_embeddings_figure_has_a_key_entry_per_support(tmp_path):
    import ntpcert
    from ntpcert.geometry.figures import support_key
    from ntpcert.geometry.pattern import SupportPattern

    inst = ntpcert.load_instance("dyck")
    pattern = SupportPattern.from_instance(inst)
    names = [str(t) for t in inst.token_names]
    keys = [support_key(pattern, g, names) for g in range(pattern.r)]
    assert len(set(keys)) == pattern.r  # one distinct entry per support group
    assert sum(int(k.rsplit(": ", 1)[1].split()[0]) for k in keys) == inst.m
