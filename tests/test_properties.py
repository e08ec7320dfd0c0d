"""The paper's statements and the invariants they imply, property-tested on drawn instances.

Each test states one claim and checks it on instances from :mod:`ntpcert.experiments.strategies` through the float
pipeline (F and W*, the separability LP, the NTP-SVM), never against stored answers.
"""

from __future__ import annotations

from types import SimpleNamespace

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from ntpcert import NTPInstance
from ntpcert.experiments import strategies as nst
from ntpcert.pipeline.float_verdicts import certify
from ntpcert.util.numbers import cosine
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.pipeline.decide import decide_separability
from ntpcert.pipeline.float_witness import float_compatibility
from ntpcert.rows.subspace import Subspace, least_squares_fit
from ntpcert.solve.svm import solve_svm

from .conftest import TOL

#: Small instances: every example solves one LP and one QP in milliseconds.
SMALL = dict(max_m=4, max_d=4, max_V=4)
#: Least cosine between W^mm and the F-perp part of GD's increment from step 10^3 to 10^4. It tends to 1;
#: over 800 drawn instances (max_m = max_d = max_V = 4) the smallest seen was 0.90.
GD_MIN_COSINE = 0.75


def _close(A: np.ndarray, B: np.ndarray, tol: float) -> bool:
    return float(np.linalg.norm(A - B)) <= tol * max(1.0, float(np.linalg.norm(B)))


def _limits(inst: NTPInstance):
    """(compatibility result, separability verdict, W^mm or None, subspace)."""
    system = KeslerSystem.build(inst)
    sub = Subspace.build(system)
    comp = SimpleNamespace(holds=float_compatibility(sub).holds, W_star=least_squares_fit(sub).W_star)
    sep = decide_separability(system)[0].holds
    W_mm = solve_svm(system).W if sep else None
    return comp, sep, W_mm, sub


# ---------------------------------------------------------------------------- Lemma 1
@pytest.mark.parametrize("family", ["gaussian", "integer"])
@given(data=st.data())
def test_lemma_1_d_greater_than_m_and_full_rank_admit_the_bound(family, data):
    """Lemma 1: d > m and rank H = m imply NTP-compatibility and NTP-separability."""
    m = data.draw(st.integers(1, 4), label="m")
    inst = data.draw(nst.ntp_instances(min_m=m, max_m=m, min_d=m + 1, max_d=m + 2, max_V=5, embedding=family,
                                       distribution=data.draw(st.sampled_from(nst.DISTRIBUTIONS))))
    assume(np.linalg.matrix_rank(inst.embeddings) == inst.m)
    rep = certify(inst, svm=False, progress=False)
    assert rep.compatible.holds is True
    assert rep.separable.holds is True


# ---------------------------------------------------------------------------- one-hot = multiclass SVM
def _crammer_singer(H: np.ndarray, y: np.ndarray, V: int) -> tuple[str, np.ndarray | None]:
    """Hard-margin multiclass SVM without bias, one constraint per (sample, wrong class)."""
    W = cp.Variable((V, H.shape[1]))
    cons = [(W[int(y[j])] - W[v]) @ H[j] >= 1 for j in range(len(y)) for v in range(V) if v != y[j]]
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W)), cons)
    prob.solve(solver="CLARABEL")
    return prob.status, W.value


@given(nst.ntp_instances(**SMALL, min_k=1, max_k=1))
def test_one_hot_supports_give_the_multiclass_svm(inst):
    """All k_j = 1: H = 0, F = {0}, W* = 0, and W^mm is the Crammer-Singer SVM without bias."""
    comp, sep, W_mm, sub = _limits(inst)
    assert inst.entropy() == 0.0 and sub.dim == 0
    assert comp.holds is True and np.all(comp.W_star == 0)
    y = inst.anchors()
    assume(sep is not None)
    status, W_cs = _crammer_singer(inst.embeddings, y, inst.V)
    if sep:
        assert status == cp.OPTIMAL
        assert _close(W_mm, W_cs, TOL["svm_argmin"])
    else:
        assert status == cp.INFEASIBLE


# ---------------------------------------------------------------------------- W^mm ignores the in-support law
@given(nst.ntp_instances(**SMALL, max_k=3), st.data())
def test_w_mm_depends_only_on_supports_and_embeddings(inst, data):
    """Redrawing the counts on the same supports changes W* but neither the verdict on (6) nor W^mm."""
    other = NTPInstance.from_counts(inst.embeddings, data.draw(nst.counts(inst.support_mask(), max_count=9)))
    _, sep, W_mm, _ = _limits(inst)
    _, sep2, W_mm2, _ = _limits(other)
    assert sep == sep2
    if sep:
        assert _close(W_mm2, W_mm, TOL["svm_argmin"])


# ---------------------------------------------------------------------------- symmetries
@given(nst.ntp_instances(**SMALL), st.data())
def test_permuting_tokens_and_contexts_permutes_the_limits(inst, data):
    """Relabel tokens by sigma and reorder contexts by tau: verdicts stay, W* (when (4) holds) and W^mm
    get their rows permuted by sigma (token z' of the new instance is token sigma[z'] of the old one)."""
    sigma = np.array(data.draw(st.permutations(range(inst.V)), label="sigma"))
    tau = np.array(data.draw(st.permutations(range(inst.m)), label="tau"))
    perm = NTPInstance.from_counts(inst.embeddings[tau], inst.counts[tau][:, sigma])
    comp, sep, W_mm, _ = _limits(inst)
    comp2, sep2, W_mm2, _ = _limits(perm)
    assert (comp.holds, sep) == (comp2.holds, sep2)
    if comp.holds:  # without (4), the least-squares point depends on the anchors z_j = min S_j
        assert _close(comp2.W_star, comp.W_star[sigma], TOL["linalg"] * 100)
    if sep:
        assert _close(W_mm2, W_mm[sigma], TOL["svm_argmin"])


@given(nst.ntp_instances(**SMALL), st.sampled_from([0.25, 0.5, 3.0, 10.0]))
def test_scaling_the_embeddings_scales_the_limits_inversely(inst, c):
    """W^mm(cH) = W^mm(H)/c and W*(cH) = W*(H)/c for c > 0; the verdicts do not change."""
    scaled = NTPInstance.from_counts(c * inst.embeddings, inst.counts)
    comp, sep, W_mm, _ = _limits(inst)
    comp2, sep2, W_mm2, _ = _limits(scaled)
    assert (comp.holds, sep) == (comp2.holds, sep2)
    assert _close(comp2.W_star, comp.W_star / c, TOL["linalg"] * 100)
    if sep:
        assert _close(W_mm2, W_mm / c, TOL["svm_argmin"])


# ---------------------------------------------------------------------------- geometry of the limits
@given(nst.ntp_instances(**SMALL))
def test_w_star_lies_in_F_and_w_mm_in_its_complement(inst):
    """P_F(W*) = W*, P_F(W^mm) = 0 (6a), hence <W*, W^mm> = 0."""
    comp, sep, W_mm, sub = _limits(inst)
    W_star = comp.W_star
    assert _close(sub.project(W_star), W_star, TOL["linalg"] * 100)
    if sep:
        scale = max(1.0, float(np.linalg.norm(W_star) * np.linalg.norm(W_mm)))
        assert np.linalg.norm(sub.project(W_mm)) <= TOL["kkt"] * max(1.0, float(np.linalg.norm(W_mm)))
        assert abs(float(np.sum(W_star * W_mm))) <= TOL["kkt"] * scale


@given(nst.ntp_instances(**SMALL, distribution="fractions"))
def test_proposition_1_the_ray_from_w_star_along_w_mm_reaches_the_entropy(inst):
    """Compatible and separable: CE(W* + g W^mm) - H decreases to 0 as g grows (Proposition 1).

    W* matches the in-support log-odds, so with o_j(g) the odds of the off-support tokens of context j
    at W* + g W^mm, CE - H = sum_j pi_j log(1 + o_j(g)); margins >= 1 give o_j(g) <= e^{-g} o_j(0)."""
    comp, sep, W_mm, _ = _limits(inst)
    assume(comp.holds is True and sep is True)
    mask = inst.support_mask()
    L = inst.logits(comp.W_star)
    odds0 = np.array([np.exp(logsumexp(L[j, ~mask[j]]) - logsumexp(L[j, mask[j]])) if (~mask[j]).any() else 0.0
                      for j in range(inst.m)])
    gs = (0.0, 5.0, 10.0, 40.0)
    gaps = [inst.excess_loss(comp.W_star + g * W_mm) for g in gs]
    assert gaps[0] == pytest.approx(float(inst.weights @ np.log1p(odds0)), rel=TOL["kkt"], abs=TOL["linalg"])
    assert all(b <= a + TOL["linalg"] for a, b in zip(gaps, gaps[1:]))
    for g, gap in zip(gs, gaps):
        assert gap <= np.exp(-g) * float(inst.weights @ odds0) * (1 + TOL["kkt"]) + TOL["linalg"]


# ---------------------------------------------------------------------------- gradient descent
def _gd(inst: NTPInstance, checkpoints: tuple[int, ...]) -> list[np.ndarray]:
    """Plain GD from 0 with the constant step 1/(2L) of the paper's Theorem 2; W at each checkpoint."""
    eta = 0.5 / inst.smoothness()
    W = np.zeros((inst.V, inst.d))
    out = []
    for k in range(1, max(checkpoints) + 1):
        W = W - eta * inst.gradient(W)
        if k in checkpoints:
            out.append(W.copy())
    return out


def _gd_direction_approaches_w_mm(inst: NTPInstance, steps: tuple[int, int, int], min_cosine: float) -> None:
    """Theorem 2: W_k/||W_k|| -> W^mm/||W^mm|| and P_F(W_k) -> W*. As for separable logistic regression
    (Soudry et al., 2018) one expects P_Fperp(W_k) = W^mm log k + rho_k with rho_k converging, so the
    F-perp part of a late increment, W^mm log(k2/k1) + rho_k2 - rho_k1, points along W^mm long before
    W_k itself does. Checked at finite k: the loss decreases (descent lemma, eta <= 1/L), P_F(W_k)
    gets closer to W*, and that increment is within an angle of W^mm."""
    comp, sep, W_mm, sub = _limits(inst)
    assume(comp.holds is True and sep is True and np.linalg.norm(W_mm) > 0)
    W0, W1, W2 = _gd(inst, steps)
    gaps = [inst.excess_loss(W) for W in (W0, W1, W2)]
    assert gaps[1] <= gaps[0] + TOL["linalg"] and gaps[2] <= gaps[1] + TOL["linalg"]
    d0 = np.linalg.norm(sub.project(W0) - comp.W_star)
    d2 = np.linalg.norm(sub.project(W2) - comp.W_star)
    assert d2 <= d0 + TOL["linalg"]
    step = sub.project_perp(W2 - W1)
    assert np.sum(step * W_mm) > 0
    assert cosine(step, W_mm) >= min_cosine


@settings(max_examples=10)
@given(nst.ntp_instances(**SMALL))
def test_gd_direction_approaches_w_mm(inst):
    """Theorem 2: W_k/||W_k|| -> W^mm/||W^mm|| and P_F(W_k) -> W*, seen at steps 10^2, 10^3, 10^4."""
    _gd_direction_approaches_w_mm(inst, (100, 1_000, 10_000), GD_MIN_COSINE)


@pytest.mark.slow
@settings(max_examples=100)
@given(nst.ntp_instances(max_m=6, max_d=6, max_V=5))
def test_gd_direction_approaches_w_mm_longer(inst):
    """As above on larger instances, at steps 10^3, 10^4, 10^5."""
    _gd_direction_approaches_w_mm(inst, (1_000, 10_000, 100_000), GD_MIN_COSINE)
