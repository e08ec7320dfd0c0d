r"""The subspace F of (5), the projections onto F and its complement, and W\*.

F is the row space of :math:`A_{eq}` (see :mod:`ntpcert.rows.kesler`). We never form a basis with V·d
columns unless asked: with the Gram matrix :math:`G = A_{eq}A_{eq}^\top = Q\Lambda Q^\top` and the
kept eigenpairs :math:`\lambda_i > \tau`, the vectors :math:`f_i = A_{eq}^\top q_i/\sqrt{\lambda_i}` are an
orthonormal basis of F, :math:`P_F = A_{eq}^\top G^+ A_{eq}` and :math:`W^* = A_{eq}^\top G^+ b` is the
minimum-Frobenius-norm solution of (4) (the unique solution inside F when (4) is solvable).

**Rank tolerance.** An eigenvalue of G counts when :math:`\lambda > \tau = \texttt{EIG\_RTOL}\cdot r\cdot\lambda_{\max}`
(``EIG_RTOL`` = 64·machine epsilon): eigenvalues of G are squared singular values of
:math:`A_{eq}`, computed with absolute error of order :math:`\epsilon\,\lambda_{\max}`.

**Certified rank.** The computed eigenvalues differ from those of the exact Gram matrix of the
(exact, dyadic) embeddings by at most :math:`\delta = \texttt{RANK\_ERR\_FACTOR}\cdot\epsilon\,(d + r)\,
\mathrm{tr}(G)` (Weyl's inequality, with the rounding of forming G, at most :math:`2d\epsilon` per
entry relative to :math:`\|h_j\|\|h_l\|`, and the backward error of the symmetric eigensolver,
about :math:`r\epsilon\|G\|`). So the exact rank of :math:`A_{eq}` is at least the number of eigenvalues
above :math:`\delta` (``certified_rank``), and all of them count when :math:`\lambda_{\min} > \delta`.

**Compatibility verdict (float).** A definite answer needs a witness: when :math:`A_{eq}` has
certified full row rank, (4) is solvable for every right-hand side, so the data are compatible
whatever the log-odds. Otherwise the answer hangs on :math:`y^\top b = 0` for the left null vectors
y of :math:`A_{eq}`, which floats cannot settle; :func:`check_compatibility` says undetermined and
hands the near-null directions to :mod:`ntpcert.pipeline.float_witness`, which turns them into exact
rational null vectors where it can. The relative residual
:math:`\rho = \|A_{eq}\mathrm{vec}(W^*) - b\|_2 / \max(1, \|b\|_2)` is reported alongside.
``ntpcert certify --exact`` decides compatibility exactly in every case.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ntpcert.rows.kesler import KeslerSystem

EIG_RTOL = 64 * np.finfo(np.float64).eps
#: The float compatibility residual is reported against these two (for orientation only: the
#: verdict needs a witness, see the module doc).
COMPAT_TOL = 1e-8
INCOMPAT_TOL = 1e-5
#: Safety factor of the certified-rank bound (module doc).
RANK_ERR_FACTOR = 4.0


@dataclass(frozen=True, eq=False)
class Subspace:
    """The subspace F of an instance, held through the eigen-decomposition of the Gram matrix.

    Attributes
    ----------
    system : KeslerSystem
    eigvecs : ndarray of shape (r, rank)
        Kept eigenvectors :math:`q_i` of G.
    eigvals : ndarray of shape (rank,)
        Kept eigenvalues :math:`\\lambda_i > \\tau`.
    tol : float
        The threshold :math:`\\tau` used.
    """

    system: KeslerSystem
    eigvecs: np.ndarray
    eigvals: np.ndarray
    tol: float
    rank_bound: float = 0.0
    certified_rank: int = 0
    near_null: np.ndarray | None = None

    @classmethod
    def build(cls, system: KeslerSystem) -> "Subspace":
        r = system.n_eq
        if r == 0:
            return cls(system, np.zeros((0, 0)), np.zeros(0), 0.0)
        G = system.eq_gram()
        lam, Q = np.linalg.eigh(G)
        lam_max = float(max(lam[-1], 0.0))
        tol = EIG_RTOL * r * lam_max
        keep = lam > tol
        d = system.instance.d
        bound = RANK_ERR_FACTOR * float(np.finfo(np.float64).eps) * (d + r) * float(np.trace(G))
        sure = lam > bound
        return cls(system, Q[:, keep], lam[keep], tol, bound, int(sure.sum()), Q[:, ~sure])

    @property
    def full_row_rank(self) -> bool:
        r"""Whether :math:`A_{eq}` certainly has full row rank (every eigenvalue above :math:`\delta`)."""
        return self.certified_rank == self.system.n_eq

    @property
    def dim(self) -> int:
        """dim F (the numerical rank of :math:`A_{eq}`)."""
        return int(self.eigvals.size)

    def _solve_gram(self, y: np.ndarray) -> np.ndarray:
        """:math:`G^+ y` through the kept eigenpairs."""
        Q = self.eigvecs
        return Q @ ((Q.T @ y) / self.eigvals)

    def project(self, W: np.ndarray) -> np.ndarray:
        """:math:`P_F(W)`, shape (V, d)."""
        if self.dim == 0:
            return np.zeros_like(np.asarray(W, dtype=np.float64))
        return self.system.apply_eq_T(self._solve_gram(self.system.apply_eq(W)))

    def project_perp(self, W: np.ndarray) -> np.ndarray:
        """:math:`P_{F^\\perp}(W) = W - P_F(W)`, shape (V, d)."""
        W = np.asarray(W, dtype=np.float64)
        return W - self.project(W)

    def basis(self) -> np.ndarray:
        """Orthonormal basis of F as an array of shape (dim F, V, d) (Frobenius inner product)."""
        inst = self.system.instance
        out = np.empty((self.dim, inst.V, inst.d))
        for i in range(self.dim):
            out[i] = self.system.apply_eq_T(self.eigvecs[:, i] / np.sqrt(self.eigvals[i]))
        return out

    def min_norm_solution(self, b: np.ndarray, *, refine: int = 1) -> np.ndarray:
        """Minimum-Frobenius-norm least-squares solution of :math:`A_{eq}\\mathrm{vec}(W) = b`,
        with ``refine`` steps of iterative refinement. Shape (V, d)."""
        inst = self.system.instance
        if self.dim == 0:
            return np.zeros((inst.V, inst.d))
        W = self.system.apply_eq_T(self._solve_gram(b))
        target = self._range_part(b)
        for _ in range(refine):
            res = target - self.system.apply_eq(W)
            W = W + self.system.apply_eq_T(self._solve_gram(res))
        return W

    def _range_part(self, b: np.ndarray) -> np.ndarray:
        Q = self.eigvecs
        return Q @ (Q.T @ b)


@dataclass(frozen=True)
class CompatibilityResult:
    """Float verdict on NTP-compatibility (4).

    Attributes
    ----------
    holds : bool or None
        True (compatible), False (not), None (undetermined); see ``by``.
    residual : float
        :math:`\\|A_{eq}\\mathrm{vec}(W^*) - b\\|_2`.
    relative_residual : float
        ``residual / max(1, ||b||_2)``, the number compared with the tolerances.
    W_star : ndarray of shape (V, d)
        The minimum-norm least-squares solution of (4). It is W* only when ``holds`` is True;
        otherwise it depends on the choice of anchors and carries no meaning of its own.
    dim_F : int
    by : str
        The witness that decided ``holds``, or why it is undetermined.
    tol, incompat_tol : float
        Orientation marks for the residual (not the verdict).
    """

    holds: bool | None
    residual: float
    relative_residual: float
    W_star: np.ndarray
    dim_F: int
    by: str = ""
    tol: float = COMPAT_TOL
    incompat_tol: float = INCOMPAT_TOL

    def to_json(self) -> dict:
        return {
            "holds": self.holds,
            "residual": self.residual,
            "relative_residual": self.relative_residual,
            "tolerance": self.tol,
            "incompatible_above": self.incompat_tol,
            "dim_F": self.dim_F,
            "by": self.by,
            "W_star_norm": float(np.linalg.norm(self.W_star)),
            "W_star_is_least_squares_only": self.holds is not True,
        }


def check_compatibility(subspace: Subspace) -> CompatibilityResult:
    """Solve (4) in the least-squares sense within F; compatible when :math:`A_{eq}` has certified
    full row rank, undetermined otherwise (see the module doc; the pipeline's witnesses may settle
    it)."""
    system = subspace.system
    b = system.log_odds()
    W = subspace.min_norm_solution(b)
    res = float(np.linalg.norm(system.apply_eq(W) - b)) if b.size else 0.0
    rel = res / max(1.0, float(np.linalg.norm(b)))
    if system.n_eq == 0:
        return CompatibilityResult(True, res, rel, W, subspace.dim, "no equations: every support has one token")
    if subspace.full_row_rank:
        lam_min = float(subspace.eigvals.min())
        return CompatibilityResult(True, res, rel, W, subspace.dim,
                                   f"A_eq has full row rank (smallest Gram eigenvalue {lam_min:.3g} > rounding bound "
                                   f"{subspace.rank_bound:.3g}): (4) is solvable for every right-hand side")
    k = system.n_eq - subspace.certified_rank
    return CompatibilityResult(None, res, rel, W, subspace.dim,
                               f"A_eq may be rank deficient ({k} Gram eigenvalues within the rounding bound "
                               f"{subspace.rank_bound:.3g}); the log-odds along its left null space decide")
