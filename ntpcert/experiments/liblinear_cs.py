r"""LIBLINEAR's Crammer–Singer multiclass SVM, for comparison on one-hot supports.

When every context has a single next token (:math:`k_j = 1`, label :math:`y_j`), (6a) is vacuous and
the NTP-SVM is the hard-margin multiclass SVM without bias

.. math:: \min_W \tfrac12\|W\|_F^2 \quad\text{s.t.}\quad (w_{y_j} - w_v)^\top h_j \ge 1 \;(v \ne y_j).

LIBLINEAR (through scikit-learn's ``LinearSVC(multi_class="crammer_singer", fit_intercept=False)``)
solves the soft-margin version with penalty :math:`C \sum_j \xi_j`. Its dual is the hard-margin dual
with the extra box :math:`\alpha_{j} \le C`; once C exceeds the largest hard-margin multiplier the two
problems have the same solution, which :func:`crammer_singer` checks by the margins it returns.
LIBLINEAR only knows the classes that occur as labels, so every token must be the label of some
context.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from ntpcert.errors import InputError, SolverError
from ntpcert.util.extras import require
from ntpcert.instance import NTPInstance

#: Default penalty; large enough for the hard-margin solution on the benchmark's instances (checked).
DEFAULT_C = 1e4

#: Default LIBLINEAR stopping tolerance (on its dual optimality violation).
DEFAULT_TOL = 1e-8

#: The soft-margin solution counts as the hard-margin one when every margin is at least 1 - this.
HARD_MARGIN_TOL = 1e-6


@dataclass(frozen=True)
class CSResult:
    """A Crammer–Singer solve.

    Attributes
    ----------
    W : ndarray of shape (V, d)
    seconds : float
        Wall time of the fit.
    iterations : int
        LIBLINEAR's iteration count.
    min_margin : float
        :math:`\\min_j \\min_{v \\ne y_j} (w_{y_j} - w_v)^\\top h_j`.
    hard_margin : bool
        ``min_margin >= 1 - HARD_MARGIN_TOL``: C was large enough.
    C, tol : float
    """

    W: np.ndarray
    seconds: float
    iterations: int
    min_margin: float
    hard_margin: bool
    C: float
    tol: float


def labels(instance: NTPInstance) -> np.ndarray:
    """The label :math:`y_j` of each context, shape (m,); InputError unless supports are one-hot and
    every token is a label."""
    k = instance.support_sizes
    bad = np.flatnonzero(k != 1)
    if bad.size:
        j = int(bad[0])
        raise InputError(f"supports: context {j} has k_j = {int(k[j])} next tokens; Crammer–Singer needs exactly one")
    y = np.array([int(s[0]) for s in instance.supports], dtype=np.int64)
    missing = np.setdiff1d(np.arange(instance.V), y)
    if missing.size:
        raise InputError(f"supports: token {int(missing[0])} is no context's label; LIBLINEAR would drop that class")
    return y


def crammer_singer(instance: NTPInstance, *, C: float = DEFAULT_C, tol: float = DEFAULT_TOL,
                   max_iter: int = 1_000_000, seed: int = 0) -> CSResult:
    """Fit LIBLINEAR's Crammer–Singer SVM without bias on a one-hot instance.

    Parameters
    ----------
    instance : NTPInstance
        One next token per context, every token a label.
    C : float
        Soft-margin penalty (large: hard margin).
    tol : float
        LIBLINEAR's stopping tolerance.
    max_iter : int
    seed : int
        LIBLINEAR's random order of examples.

    Returns
    -------
    CSResult
        ``W`` has shape (V, d) in token order.
    """
    y = labels(instance)
    LinearSVC = require("sklearn.svm", "bench", "the LIBLINEAR comparison").LinearSVC
    H = instance.embeddings
    clf = LinearSVC(multi_class="crammer_singer", C=C, fit_intercept=False, tol=tol, max_iter=max_iter,
                    random_state=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning is judged by the margins below
        clf.fit(H, y)
    seconds = time.perf_counter() - t0
    W = np.asarray(clf.coef_, dtype=np.float64)
    if W.shape != (instance.V, instance.d):
        raise SolverError(f"liblinear: coefficients of shape {W.shape}, expected {(instance.V, instance.d)}")
    Z = H @ W.T
    own = Z[np.arange(instance.m), y]
    Z[np.arange(instance.m), y] = -np.inf
    min_margin = float((own - Z.max(axis=1)).min())
    hard = min_margin >= 1 - HARD_MARGIN_TOL
    return CSResult(W, seconds, int(np.max(clf.n_iter_)), min_margin, hard, float(C), float(tol))
