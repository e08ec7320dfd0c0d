"""Lemma 1's rank certificates (ntpcert.exact.rank_witness): structure peeled, cores mod p, column
selections, their exact re-check, forgeries refused, and the pipeline without a size cap."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.certificate.checker import verify_certificate
from ntpcert.certificate.jsonio import seal
from ntpcert.exact.rank_witness import certify_rank, check_rank_witness, peel
from ntpcert.pipeline import decide as dm
from ntpcert.pipeline.exact_verdicts import exact_certify
from ntpcert.pipeline.float_verdicts import certify
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.rows.onehot import onehot_columns, onehot_w_star
from ntpcert.rows.subspace import Subspace, least_squares_fit

from .conftest import TOL


def _kgram(rng, m, V):
    """A one-hot 2-gram H (m, 2V) of m distinct pairs."""
    rows = set()
    m = min(m, V * V)
    while len(rows) < m:
        rows.add((int(rng.integers(V)), int(rng.integers(V))))
    H = np.zeros((m, 2 * V))
    for i, (a, b) in enumerate(sorted(rows)):
        H[i, a] = H[i, V + b] = 1.0
    return H


def _counts(rng, m, V):
    C = rng.integers(0, 4, size=(m, V))
    C[np.arange(m), rng.integers(0, V, size=m)] += 1
    return C


def test_a_permutation_is_peeled_completely():
    rng = np.random.default_rng(0)
    P = np.eye(40)[rng.permutation(40)] * rng.choice([-2.0, 0.5, 3.0], size=(40, 1))
    w = certify_rank(P)
    assert (w.route, w.full, w.modulus, w.bound) == ("permutation", True, None, 40)
    assert check_rank_witness(P, w.to_json(), 40) == ""


@pytest.mark.parametrize("seed", range(4))
def test_kgram_bound_is_the_exact_rank(seed):
    rng = np.random.default_rng(seed)
    H = _kgram(rng, int(rng.integers(10, 40)), int(rng.integers(5, 12)))
    w = certify_rank(H)
    assert w.bound == np.linalg.matrix_rank(H)  # the core mod a large prime has the rank over Q here
    assert check_rank_witness(H, w.to_json(), w.bound) == ""
    assert check_rank_witness(H, w.to_json(), w.bound + 1) != ""  # it proves no more than it says


def test_wide_dense_core_is_projected_onto_a_column_selection():
    rng = np.random.default_rng(1)
    H = rng.standard_normal((30, 400))
    w = certify_rank(H)
    assert w.route == "projected-mod-p" and w.full and len(w.core_cols) < 400
    assert check_rank_witness(H, w.to_json(), 30) == ""


def test_a_core_too_large_is_skipped_naming_its_size_and_the_limit():
    H = np.random.default_rng(2).standard_normal((50, 60))
    assert certify_rank(H, max_work=50 * 50 * 60).full  # the limit is inclusive: exactly its work is tried
    w = certify_rank(H, max_work=50 * 50 * 60 - 1)
    assert not w.full and w.bound == 0 and "skipped" in w.skipped and "50 x 60" in w.skipped
    assert "1.5e+05 cells" in w.skipped and "CORE_RANK_MAX_WORK = 1.5e+05" in w.skipped


def _forge(w: dict, edit) -> dict:
    out = copy.deepcopy(w)
    edit(out)
    return out


def test_forged_rank_witnesses_are_refused():
    rng = np.random.default_rng(3)
    H = _kgram(rng, 25, 8)
    w = certify_rank(H).to_json()
    assert w["pivots"] and w["core_rows"]
    want = len(w["pivots"]) + w["core_rank"]

    def reverse(c):  # pivot 0 moved to a column that core rows also use: not triangular
        r0 = c["pivots"][0][0]
        col = next(k for k in c["core_cols"] if H[c["core_rows"], k].any())
        c["pivots"][0] = [r0, col]
        c["core_cols"] = [k for k in c["core_cols"] if k != col]

    def drop_core_row(c):
        c["core_rows"] = c["core_rows"][1:]

    def inflate(c):
        c["core_rank"] += 1

    def not_prime(c):
        c["modulus"] = 2147483646

    def out_of_range(c):
        c["core_cols"] = c["core_cols"] + [10 ** 6]

    def pivot_in_core(c):
        c["core_cols"] = c["core_cols"] + [c["pivots"][0][1]]

    def repeat_pivot(c):
        c["pivots"] = c["pivots"] + [c["pivots"][0]]

    cases = [(reverse, "peeled later or never"), (drop_core_row, "core_rows"), (inflate, "rank"),
             (not_prime, "not a prime"), (out_of_range, "out of range"), (pivot_in_core, "meet a pivot"),
             (repeat_pivot, "repeats")]
    for edit, needle in cases:
        why = check_rank_witness(H, _forge(w, edit), want + (1 if edit is inflate else 0))
        assert needle in why, (edit.__name__, why)
    # a full-rank claim on a matrix with two equal rows: the checker finds the rank missing
    H2 = np.vstack([H, H[:1]])
    w2 = certify_rank(H2)
    assert check_rank_witness(H2, w2.to_json(), H2.shape[0]) != ""
    forged = dict(w2.to_json(), core_rank=w2.core_rank + 1)
    assert check_rank_witness(H2, forged, H2.shape[0]) != ""


def test_onehot_lemma1_certificate_is_sparse_and_verified_and_its_forgeries_fail():
    rng = np.random.default_rng(4)
    m, V = 40, 5  # fill 1/40: the embeddings go into the certificate sparse
    inst = NTPInstance.from_counts(np.eye(m)[rng.permutation(m)], _counts(rng, m, V))
    rep = exact_certify(inst, svm=False)
    assert rep.check.valid, rep.check.reason
    cert = rep.certificate
    assert "embeddings_sparse" in cert["instance"]["embedded"] and "embeddings" not in cert["instance"]["embedded"]
    wit = cert["separability"]["embeddings_rank_witness"]
    assert len(wit["pivots"]) == m and cert["compatibility"]["embeddings_rank_witness"] == wit

    def bad(edit, needle):
        out = copy.deepcopy(cert)
        edit(out)
        verdict = verify_certificate(seal(out))
        assert not verdict.valid and needle in verdict.reason, verdict.reason

    def swap_pivots(c):
        p = c["separability"]["embeddings_rank_witness"]["pivots"]
        p[0][1], p[1][1] = p[1][1], p[0][1]
    bad(swap_pivots, "separability.embeddings_rank_witness")

    def short(c):
        c["compatibility"]["embeddings_rank_witness"]["pivots"].pop()
    bad(short, "compatibility.embeddings_rank_witness")

    def move_entry(c):  # another H: the fingerprint no longer matches
        c["instance"]["embedded"]["embeddings_sparse"][0][2] = 2
    bad(move_entry, "fingerprint")

    def unsorted(c):
        e = c["instance"]["embedded"]["embeddings_sparse"]
        e[0], e[1] = e[1], e[0]
    bad(unsorted, "instance.embedded.embeddings_sparse[1]")

    def zero(c):
        c["instance"]["embedded"]["embeddings_sparse"][0][2] = 0
    bad(zero, "instance.embedded.embeddings_sparse[0]")

    def both(c):
        c["instance"]["embedded"]["embeddings"] = [[0] * m for _ in range(m)]
    bad(both, "give embeddings, or embeddings_sparse")


def test_lemma1_decides_onehot_contexts_past_the_old_cap():
    """m = d = 2,100 (4.41 M cells, past the old 4,000,000 cap): decided by Lemma 1 from the permutation,
    with W* in closed form."""
    rng = np.random.default_rng(5)
    m, V = 2100, 480
    inst = NTPInstance.from_counts(np.eye(m)[rng.permutation(m)], _counts(rng, m, V))
    out = certify(inst, svm=False).to_json()
    assert out["compatible"]["engine"] == "lemma1" and out["separable"]["engine"] == "lemma1"
    assert out["lemma1"]["route"] == "permutation" and out["lemma1"]["rank_lower_bound"] == m
    assert out["compatible"]["least_squares"]["method"] == "closed-form"
    assert out["compatible"]["relative_residual"] < TOL["linalg"]


def test_onehot_w_star_matches_the_min_norm_solution():
    rng = np.random.default_rng(6)
    m = V = 9
    H = np.eye(m)[rng.permutation(m)] * rng.choice([0.5, 2.0, -3.0], size=(m, 1))
    inst = NTPInstance.from_counts(H, _counts(rng, m, V))
    system = KeslerSystem.build(inst)
    W, res = onehot_w_star(system, *onehot_columns(H))
    ref = least_squares_fit(Subspace.build(system)).W_star
    assert np.abs(W - ref).max() < TOL["linalg"] * max(1.0, np.abs(ref).max())
    assert np.abs(res).max() < TOL["linalg"]
    assert onehot_columns(np.vstack([H[:-1], H[:1]])) is None  # a repeated column: not one coordinate each


def test_peel_stops_at_a_cycle():
    """Rows (1,1,0), (0,1,1), (1,0,1): no column singleton, nothing peeled; the core mod p has rank 3."""
    H = np.array([[1.0, 1, 0], [0, 1, 1], [1, 0, 1]])
    pivots, alive = peel(H)
    assert pivots == [] and alive.all()
    w = certify_rank(H)
    assert w.full and w.route == "dense-mod-p" and dm.lemma1(NTPInstance.from_counts(H, np.eye(3, dtype=int) + 1)).full
