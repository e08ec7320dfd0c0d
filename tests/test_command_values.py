"""What the commands report and write is decided in the library (pipeline.limits, pipeline.svm_outcome)."""

from __future__ import annotations

import numpy as np

from ntpcert.pipeline.float_verdicts import certify
from ntpcert.pipeline.limits import limit_files, output_names

from .conftest import TOL, random_instance


def test_the_files_and_the_reasons_for_what_is_left_out() -> None:
    rep = certify(random_instance(np.random.default_rng(3), 5, 8, 4, 1, 3), svm=True)
    plain = limit_files(rep)
    assert set(plain.arrays) == {"W_star.npy", "W_mm.npy"} and plain.summary["F_basis_skipped"].startswith("not requested")
    full = limit_files(rep, basis=True)
    B = full.arrays["F_basis.npy"]
    assert B.shape == (rep.subspace.dim, 4, 8) == tuple(full.summary["files"]["F_basis.npy"])
    flat = B.reshape(B.shape[0], -1)
    assert np.abs(flat @ flat.T - np.eye(B.shape[0])).max() <= TOL["linalg"]  # orthonormal
    tiny = limit_files(rep, basis=True, max_basis_entries=1)
    assert "F_basis.npy" not in tiny.arrays and tiny.summary["F_basis_skipped"].startswith("dim F * V * d")
    assert output_names(False) == ("W_star.npy", "W_mm.npy", "W_fin.npy", "summary.json")  # W_fin: non-separable data


def test_svm_outcome_is_a_solution_or_a_refutation() -> None:
    from ntpcert import NTPInstance
    from ntpcert.pipeline.svm_outcome import solve_or_refute

    ok = solve_or_refute(random_instance(np.random.default_rng(4), 4, 6, 4, 1, 3), solver="auto")
    j = ok.to_json(out="W.npy")
    assert ok.separable and j["separable"] is True and j["out"] == "W.npy" and j["gap"] <= TOL["kkt"] * max(1.0, j["objective"])
    assert ok.lines(out="W.npy")[-1].startswith("  W^mm written to W.npy")
    same = NTPInstance.from_counts([[1.0, 0.0], [1.0, 0.0]], [[1, 0, 0], [0, 1, 0]])  # one h, two supports
    no = solve_or_refute(same, solver="auto")
    assert not no.separable and no.to_json()["separable"] is False and no.lines()[0].startswith("not separable")
