r"""An exact rational enclosure of :math:`L^{mm}`, the value of the nuclear-norm NTP-SVM of a support pattern.

:math:`L^{mm}` is in general irrational, so "exact" means a rational interval ``[lower, upper]`` proved to
contain it in rational arithmetic, from a float primal-dual pair (e.g. the structured solver's):

* **Primal, upper end.** The float L is repaired in rationals (each support set to the float mean
  :math:`c_j` read as a dyadic rational, every other entry to :math:`\min(L_{v,j}, c_j - 1)`): exactly
  feasible. With the SVD :math:`L \approx U\Sigma W^\top` (U square), :math:`A = Q D Q^\top` with Q the float U
  read exactly and :math:`D = \mathrm{diag}(\max(\sigma_i, \varepsilon\sigma_1))` (:data:`SIGMA_FLOOR`), computed
  in rationals: positive definite (Q is invertible), and :math:`\|L\|_* \le
  \sqrt{\mathrm{tr}A\cdot\mathrm{tr}(L^\top A^{-1}L)}` (:mod:`ntpcert.certificate.checker.nuclear`), rounded up
  to a dyadic ``upper``. At :math:`A = (LL^\top)^{1/2}` the bound is :math:`\|L\|_*` itself and stationary, so
  float errors in Q and D cost second order; the floor costs about :math:`\varepsilon\sigma_1` per tiny
  singular value. A acts on the smaller side (on :math:`L^\top` when m < V).
* **Dual, lower end.** The float Λ is read exactly, off-support entries clipped to :math:`\le 0`, each
  column's in-support entries shifted to a zero column sum (exact), then scaled by a dyadic
  :math:`s \approx 1/(\|\Lambda\|_2(1 + t))` with t the first of :data:`NORM_SLACKS` for which
  :math:`I - s^2\Lambda^\top\Lambda` has an exact :math:`LDL^\top` with positive pivots;
  ``lower`` is the dual value :math:`-\sum_{v\notin S_j}\Lambda_{v,j}` exactly. The scaling costs t relatively.

The width is then the float pair's own duality gap plus about t: the structured solver run with
``gap_tol=1e-15`` reaches gaps near 1e-16 on the patterns of the tests, and the enclosures there have relative
width near 1e-15. :func:`check_enclosure` re-checks a record with the independent checker (trusting nothing of
this module).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from ntpcert.certificate.checker.common import Invalid
from ntpcert.certificate.checker.nuclear import (NUCLEAR_FORMAT, NUCLEAR_VERSION, check_nuclear_enclosure,
                                                 first_nonpositive_pivot, gram_complement)
from ntpcert.errors import InputError, SolverError
from ntpcert.geometry.pattern import SupportPattern

#: Singular values of the primal below this fraction of the largest are raised to it in A.
SIGMA_FLOOR = 1e-15
#: Relative slacks tried, in order, on the float spectral norm of the dual before its exact check.
NORM_SLACKS = (4e-16, 2e-15, 1e-14, 1e-13, 1e-12, 1e-10, 1e-8, 1e-6)
#: Bits kept when the upper end is rounded up to a dyadic rational (relative rounding about 2^-BITS).
UPPER_BITS = 80


def _q(x: float) -> flint.fmpq:
    n, d = float(x).as_integer_ratio()
    return flint.fmpq(n, d)


def _fr(x: flint.fmpq) -> Fraction:
    return Fraction(int(x.p), int(x.q))


@dataclass(frozen=True, eq=False)
class Enclosure:
    r"""A proved rational interval for :math:`L^{mm}` and its witnesses.

    Attributes
    ----------
    lower, upper : Fraction
        :math:`\mathrm{lower} \le L^{mm} \le \mathrm{upper}`.
    L : list of list of Fraction, shape (V, m)
        The exactly feasible primal.
    A : list of list of Fraction, shape (n, n)
        The positive definite matrix of the upper end (n = V, or n = m acting on :math:`L^\top` when m < V).
    Lam : list of list of Fraction, shape (V, m)
        The exactly dual-feasible Λ, :math:`\|\Lambda\|_2 < 1`.
    norm_slack : float
        The relative slack t given up on the dual's spectral norm.
    """

    pattern: SupportPattern
    lower: Fraction
    upper: Fraction
    L: list
    A: list
    Lam: list
    norm_slack: float

    @property
    def width(self) -> Fraction:
        """``upper - lower``."""
        return self.upper - self.lower

    @property
    def relative_width(self) -> float:
        """``(upper - lower) / upper`` (0 when upper is 0)."""
        return float(self.width / self.upper) if self.upper > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """The enclosure file (format ``ntpcert-nuclear-enclosure``, docs/certificate-format.md)."""
        s = lambda M: [[str(v) for v in row] for row in M]  # noqa: E731
        return {"format": NUCLEAR_FORMAT, "version": NUCLEAR_VERSION,
                "mask": self.pattern.mask.astype(int).tolist(), "L": s(self.L), "A": s(self.A),
                "Lambda": s(self.Lam), "lower": str(self.lower), "upper": str(self.upper)}


def exact_primal(pattern: SupportPattern, L: np.ndarray) -> list[list[flint.fmpq]]:
    """The float ``L`` (shape (V, m)) made exactly feasible in rationals (module doc)."""
    L = pattern.check_logits(L)
    S = pattern.mask
    out = []
    c = [_q(float(np.mean(L[S[:, j], j]))) for j in range(pattern.m)]
    for v in range(pattern.V):
        out.append([c[j] if S[v, j] else min(_q(L[v, j]), c[j] - 1) for j in range(pattern.m)])
    return out


def exact_dual(pattern: SupportPattern, Lam: np.ndarray) -> list[list[flint.fmpq]]:
    """The float ``Lam`` made exactly sign- and sum-feasible (not yet scaled): off-support entries clipped to
    ``<= 0``, in-support entries of each column shifted by one rational so that the column sums to 0."""
    Lam = pattern.check_logits(Lam, "Lam")
    S = pattern.mask
    out = [[_q(Lam[v, j]) if S[v, j] else min(_q(Lam[v, j]), flint.fmpq(0)) for j in range(pattern.m)]
           for v in range(pattern.V)]
    for j in range(pattern.m):
        inn = np.flatnonzero(S[:, j])
        shift = sum((out[v][j] for v in range(pattern.V)), flint.fmpq(0)) / int(inn.size)
        for v in inn:
            out[v][j] -= shift
    return out


def _upper(Lq: list[list[flint.fmpq]], Lf: np.ndarray) -> tuple[Fraction, list[list[flint.fmpq]]]:
    V, m = Lf.shape
    tall = m < V  # A acts on L^T, the smaller side
    Mf = Lf.T if tall else Lf
    n = Mf.shape[0]
    U, sv, _ = np.linalg.svd(Mf, full_matrices=True)
    top = float(sv[0]) if sv.size and sv[0] > 0 else 1.0
    D = np.full(n, SIGMA_FLOOR * top)
    D[: sv.size] = np.maximum(sv, SIGMA_FLOOR * top)
    Q = flint.fmpq_mat(n, n, [_q(x) for x in U.reshape(-1)])
    Dm = flint.fmpq_mat(n, n, [(_q(D[i]) if i == j else 0) for i in range(n) for j in range(n)])
    Am = Q * Dm * Q.transpose()
    A = [[Am[i, j] for j in range(n)] for i in range(n)]
    Lm = flint.fmpq_mat(V, m, [v for r in Lq for v in r])
    if tall:
        Lm = Lm.transpose()
    Y = Am.solve(Lm)
    quad = sum((Lm[i, j] * Y[i, j] for i in range(Lm.nrows()) for j in range(Lm.ncols())), flint.fmpq(0))
    prod = _fr(sum((A[i][i] for i in range(n)), flint.fmpq(0)) * quad)
    # smallest dyadic N / 2^k above sqrt(prod), k giving about UPPER_BITS bits
    k = max(0, UPPER_BITS - (prod.numerator.bit_length() - prod.denominator.bit_length()) // 2)
    scaled = prod * 4 ** k
    N = math.isqrt(scaled.numerator // scaled.denominator) + 1
    return Fraction(N, 2 ** k), A


def _scaled_dual(Lq: list[list[flint.fmpq]]) -> tuple[list[list[flint.fmpq]], float]:
    Lf = np.array([[float(v) for v in r] for r in Lq])
    sigma = float(np.linalg.norm(Lf, 2))
    if not sigma > 0:
        return Lq, 0.0
    for t in NORM_SLACKS:
        s = _q(1.0 / (sigma * (1.0 + t)))
        out = [[v * s for v in r] for r in Lq]
        if first_nonpositive_pivot(gram_complement(out)) is None:
            return out, t
    raise SolverError(f"enclosure: the dual's spectral norm could not be certified below 1 (float norm {sigma:.6g})")


def nuclear_enclosure(pattern: SupportPattern, L: np.ndarray, Lam: np.ndarray) -> Enclosure:
    """A proved rational enclosure of :math:`L^{mm}` from a float primal ``L`` and dual ``Lam`` (both shape
    (V, m), e.g. :attr:`NuclearSVMSolution.L` and ``.dual``); see the module doc.

    Raises
    ------
    InputError
        On arrays of the wrong shape or with non-finite entries.
    SolverError
        When the dual's norm cannot be certified below 1 by any of :data:`NORM_SLACKS`.
    """
    Lq = exact_primal(pattern, L)
    Lf = np.array([[float(v) for v in r] for r in Lq])
    upper, A = _upper(Lq, Lf)
    Lamq, t = _scaled_dual(exact_dual(pattern, Lam))
    lower = _fr(-sum((Lamq[v][j] for j in range(pattern.m) for v in range(pattern.V) if not pattern.mask[v, j]),
                     flint.fmpq(0)))
    conv = lambda M: [[_fr(v) for v in r] for r in M]  # noqa: E731
    return Enclosure(pattern, lower, upper, conv(Lq), conv(A), conv(Lamq), t)


def check_enclosure(pattern: SupportPattern, record: dict) -> tuple[bool, str]:
    """``(ok, reason)``: whether ``record`` (an enclosure file, :meth:`Enclosure.to_json`) is a valid proof for
    ``pattern``, by the independent checker (:mod:`ntpcert.certificate.checker.nuclear`); reason is the notes
    joined, or the first failed check."""
    try:
        notes = check_nuclear_enclosure(record, pattern.mask.tolist())
    except Invalid as err:
        return False, str(err)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as err:
        return False, f"malformed enclosure: {type(err).__name__}: {err}"
    return True, "; ".join(notes)


__all__ = ["Enclosure", "NORM_SLACKS", "SIGMA_FLOOR", "check_enclosure", "exact_dual", "exact_primal",
           "nuclear_enclosure"]
