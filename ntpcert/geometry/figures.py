"""Figures of the geometry of L^mm (matplotlib, Agg): figures only, no computation beyond ordering."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ntpcert.geometry.embeddings import Embeddings
from ntpcert.geometry.pattern import SupportPattern


#: Tokens are labelled in the figures up to this vocabulary size (smaller type above 40).
LABEL_MAX_V = 100


def _names(V: int, token_names: Sequence[str] | None) -> list[str]:
    """Labels for the figures: the token names with a space shown as ␣ (plain indices without names)."""
    if token_names is None:
        return [str(i) for i in range(V)]
    return ["␣" if str(t) == " " else str(t) for t in token_names]


def _subplots(*grid: int, figsize: tuple[float, float]):
    """A figure and its axes through matplotlib's object API: no pyplot, no ``matplotlib.use`` (a library
    does not choose the process's backend); saving a Figure renders it on the Agg canvas."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*grid)


def word_gram_figure(emb: Embeddings, pattern: SupportPattern, path: str,
                     token_names: Sequence[str] | None = None, title: str | None = None) -> None:
    """Heat map of the word-embedding cosines, tokens ordered by their row of the support matrix (tokens that
    follow the same contexts are adjacent; lines separate the groups)."""
    labels = pattern.token_groups()
    order = np.lexsort((np.arange(pattern.V), labels))
    C = emb.word_cosines()[np.ix_(order, order)]
    names = _names(pattern.V, token_names)
    fig, ax = _subplots(figsize=(1.5 + 0.35 * pattern.V, 1.0 + 0.35 * pattern.V) if pattern.V <= 30 else (9, 8))
    im = ax.imshow(C, cmap="RdBu_r", vmin=-1, vmax=1)
    if pattern.V <= LABEL_MAX_V:
        fs = 10 if pattern.V <= 40 else 5
        ax.set_xticks(range(pattern.V), [names[i] for i in order], rotation=90, fontsize=fs)
        ax.set_yticks(range(pattern.V), [names[i] for i in order], fontsize=fs)
    bounds = np.flatnonzero(np.diff(labels[order])) + 0.5
    for b in bounds:
        ax.axhline(b, color="k", lw=0.8)
        ax.axvline(b, color="k", lw=0.8)
    ax.set_title(f"{title + ': ' if title else ''}cosines of word embeddings of " + "$L^{\\mathrm{mm}}$\n"
                 "(ordered by support-matrix row)", fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


#: A qualitative palette (matplotlib's tab10) crossed with markers: 60 distinct (colour, marker) keys.
PALETTE = tuple(f"C{i}" for i in range(10))
MARKERS = ("o", "s", "^", "D", "v", "P")
#: Tokens of a support named in the figure's key before "...".
KEY_TOKENS = 4
#: Support groups with their own colour and key entry (the most frequent ones); the others are grey.
KEY_MAX = 40


def support_key(pattern: SupportPattern, g: int, names: Sequence[str]) -> str:
    """The key entry of support group ``g``: its tokens (the first few) and how many contexts share it."""
    toks = [names[v] for v in np.flatnonzero(pattern.groups[:, g])]
    shown = ", ".join(toks[:KEY_TOKENS]) + (f", ... ({len(toks)})" if len(toks) > KEY_TOKENS else "")
    n = int(np.sum(pattern.group_of == g))
    return f"{{{shown}}}: {n} context{'s' if n != 1 else ''}"


def embedding_projection_figure(emb: Embeddings, pattern: SupportPattern, path: str,
                                token_names: Sequence[str] | None = None, title: str | None = None) -> None:
    """Word and context embeddings projected on the top two singular directions of L^mm; each support
    group (the :data:`KEY_MAX` most frequent, when there are more) has its own (colour, marker) and an
    entry in the key naming its tokens, the others are grey (collapsed contexts sit on one point)."""
    k = min(2, emb.rank)
    W = np.zeros((pattern.V, 2))
    H = np.zeros((pattern.m, 2))
    W[:, :k], H[:, :k] = emb.W[:, :k], emb.H[:, :k]
    names = _names(pattern.V, token_names)
    sizes = np.bincount(pattern.group_of, minlength=pattern.r)
    keyed = [int(g) for g in np.argsort(-sizes, kind="stable")[:KEY_MAX]] if pattern.r > KEY_MAX else list(range(pattern.r))
    rest = np.setdiff1d(np.arange(pattern.r), keyed)
    ncol = 1 if len(keyed) <= 24 else 2
    fig, ax = _subplots(figsize=(6.5 + 2.6 * ncol, 6))
    if rest.size:  # beyond the key: grey, drawn first, with one entry
        sel = np.isin(pattern.group_of, rest)
        ax.scatter(H[sel, 0], H[sel, 1], color="0.7", marker=".", s=20,
                   label=f"{rest.size} other supports: {int(sel.sum())} contexts")
    for i, g in enumerate(keyed):
        sel = pattern.group_of == g
        ax.scatter(H[sel, 0], H[sel, 1], color=PALETTE[i % len(PALETTE)],
                   marker=MARKERS[(i // len(PALETTE)) % len(MARKERS)], s=55, alpha=0.75, edgecolors="k",
                   linewidths=0.3, label=support_key(pattern, g, names))
    ax.scatter(W[:, 0], W[:, 1], c="k", marker="x", s=60, label="words (labelled)")
    if pattern.V <= LABEL_MAX_V:
        for i in range(pattern.V):
            ax.annotate(names[i], W[i], textcoords="offset points", xytext=(4, 4),
                        fontsize=10 if pattern.V <= 40 else 7)
    ax.axhline(0, color="0.8", lw=0.5)
    ax.axvline(0, color="0.8", lw=0.5)
    ax.set_xlabel("singular direction 1")
    ax.set_ylabel("singular direction 2")
    head = f"{title}: " if title else ""
    ax.set_title(f"{head}embeddings of $L^{{\\mathrm{{mm}}}}$ (rank {emb.rank}; {pattern.r} distinct supports "
                 f"of {pattern.m} contexts)", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, ncol=ncol, title="context supports",
              title_fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def singular_values_figure(emb: Embeddings, path: str, title: str | None = None) -> None:
    """The singular values of L^mm, largest first (its rank is the number of bars)."""
    fig, ax = _subplots(figsize=(5, 3.5))
    ax.set_title(f"{title + ': ' if title else ''}singular values of " + "$L^{\\mathrm{mm}}$" + f" (rank {emb.rank})",
                 fontsize=10)
    ax.bar(np.arange(1, emb.rank + 1), emb.singular_values)
    ax.set_xlabel("index")
    ax.set_ylabel("singular value of $L^{\\mathrm{mm}}$")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


__all__ = ["embedding_projection_figure", "singular_values_figure", "word_gram_figure"]


def training_figure(trajectories, path: str, title: str | None = None) -> None:
    """Four panels over steps (log scale) for each joint trajectory: 1 − cos(L_k, L^mm), CE − ℋ, ‖L_k‖_F and
    the context-collapse defect of P_F⊥ L_k; ``title`` (the instance) heads it, with each run's step size in
    the key."""
    fig, axes = _subplots(2, 2, figsize=(10, 7))
    panels = (("cos_mm", "$1 - \\cos(L_k, L^{\\mathrm{mm}})$", True),
              ("excess_loss", "$\\mathrm{CE} - \\mathcal{H}$", True),
              ("norm_L", "$\\|L_k\\|_F$", False), ("context_collapse", "context-collapse defect", True))
    for ax, (key, label, one_minus_or_log) in zip(axes.ravel(), panels):
        for tr in trajectories:
            s = np.maximum(tr.steps, 1)
            y = 1.0 - tr.metrics[key] if key == "cos_mm" else tr.metrics[key]
            ax.plot(s, np.maximum(y, 1e-16), label=_run_label(tr))
        ax.set_xscale("log")
        if one_minus_or_log:
            ax.set_yscale("log")
        ax.set_xlabel("step $k$")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _run_label(tr) -> str:
    """``gd (η=0.5)``: the optimiser and its step size when the trajectory records one."""
    lr = getattr(tr, "lr", None)
    return f"{tr.optimizer} ($\\eta$={lr:g})" if isinstance(lr, (int, float)) else str(tr.optimizer)


__all__ += ["training_figure"]
