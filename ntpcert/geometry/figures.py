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


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def word_gram_figure(emb: Embeddings, pattern: SupportPattern, path: str,
                     token_names: Sequence[str] | None = None) -> None:
    """Heat map of the word-embedding cosines, tokens ordered by their row of the support matrix (tokens that
    follow the same contexts are adjacent; lines separate the groups)."""
    plt = _plt()
    labels = pattern.token_groups()
    order = np.lexsort((np.arange(pattern.V), labels))
    C = emb.word_cosines()[np.ix_(order, order)]
    names = _names(pattern.V, token_names)
    fig, ax = plt.subplots(figsize=(1.5 + 0.35 * pattern.V, 1.0 + 0.35 * pattern.V) if pattern.V <= 30 else (9, 8))
    im = ax.imshow(C, cmap="RdBu_r", vmin=-1, vmax=1)
    if pattern.V <= LABEL_MAX_V:
        fs = 10 if pattern.V <= 40 else 5
        ax.set_xticks(range(pattern.V), [names[i] for i in order], rotation=90, fontsize=fs)
        ax.set_yticks(range(pattern.V), [names[i] for i in order], fontsize=fs)
    bounds = np.flatnonzero(np.diff(labels[order])) + 0.5
    for b in bounds:
        ax.axhline(b, color="k", lw=0.8)
        ax.axvline(b, color="k", lw=0.8)
    ax.set_title("cosines of word embeddings of $L^{mm}$\n(ordered by support-matrix row)")
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def embedding_projection_figure(emb: Embeddings, pattern: SupportPattern, path: str,
                                token_names: Sequence[str] | None = None) -> None:
    """Word and context embeddings projected on the top two singular directions of L^mm; contexts coloured by
    their support group (collapsed contexts sit on one point)."""
    plt = _plt()
    k = min(2, emb.rank)
    W = np.zeros((pattern.V, 2))
    H = np.zeros((pattern.m, 2))
    W[:, :k], H[:, :k] = emb.W[:, :k], emb.H[:, :k]
    names = _names(pattern.V, token_names)
    fig, ax = plt.subplots(figsize=(6.5, 6))
    sc = ax.scatter(H[:, 0], H[:, 1], c=pattern.group_of, cmap="tab20", s=60, alpha=0.6, marker="o",
                    label="contexts (colour = support)")
    ax.scatter(W[:, 0], W[:, 1], c="k", marker="x", s=60, label="words")
    if pattern.V <= LABEL_MAX_V:
        for i in range(pattern.V):
            ax.annotate(names[i], W[i], textcoords="offset points", xytext=(4, 4),
                        fontsize=10 if pattern.V <= 40 else 7)
    ax.axhline(0, color="0.8", lw=0.5)
    ax.axvline(0, color="0.8", lw=0.5)
    ax.set_xlabel("singular direction 1")
    ax.set_ylabel("singular direction 2")
    ax.set_title(f"embeddings of $L^{{mm}}$ (rank {emb.rank}; {pattern.r} distinct supports of {pattern.m} contexts)")
    ax.legend(loc="best")
    del sc
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def singular_values_figure(emb: Embeddings, path: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(np.arange(1, emb.rank + 1), emb.singular_values)
    ax.set_xlabel("index")
    ax.set_ylabel("singular value of $L^{mm}$")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


__all__ = ["embedding_projection_figure", "singular_values_figure", "word_gram_figure"]


def training_figure(trajectories, path: str) -> None:
    """Four panels over steps (log scale) for each joint trajectory: 1 − cos(L_k, L^mm), CE − ℋ, ‖L_k‖_F and
    the context-collapse defect of P_F⊥ L_k."""
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    panels = (("cos_mm", "1 − cos($L_k$, $L^{mm}$)", True), ("excess_loss", "CE − $\\mathcal{H}$", True),
              ("norm_L", "$\\|L_k\\|_F$", False), ("context_collapse", "context-collapse defect", True))
    for ax, (key, label, one_minus_or_log) in zip(axes.ravel(), panels):
        for tr in trajectories:
            s = np.maximum(tr.steps, 1)
            y = 1.0 - tr.metrics[key] if key == "cos_mm" else tr.metrics[key]
            ax.plot(s, np.maximum(y, 1e-16), label=tr.optimizer)
        ax.set_xscale("log")
        if one_minus_or_log:
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ += ["training_figure"]
