"""Trajectories: the metrics' definitions on instances with known W* and W^mm, the behaviour on
separable and non-separable data, and the ``trajectory`` / ``reproduce`` commands."""

from __future__ import annotations

import csv
import io
import json
import os

import numpy as np
import pytest

from ntpcert import NTPInstance
import ntpcert.dynamics.optimizers as O
from ntpcert.errors import InputError, SolverError
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.pipeline.decide import decide_separability
from ntpcert.dynamics.trajectory import BASE_METRICS, Limits, geometric_grid, metric_names, metrics, run

from .conftest import TOL, random_instance


# ---------------------------------------------------------------------------- instances
def onehot_instance(rng: np.random.Generator, m: int = 4, V: int = 5) -> NTPInstance:
    """h_j = e_j: W* and W^mm have closed forms column by column (see the tests below)."""
    C = np.zeros((m, V), dtype=np.int64)
    for j in range(m):
        k = int(rng.integers(1, V))
        S = rng.choice(V, size=k, replace=False)
        C[j, S] = rng.integers(1, 12, size=k)
    return NTPInstance.from_counts(np.eye(m), C)


def closed_forms(inst: NTPInstance) -> tuple[np.ndarray, np.ndarray]:
    r"""With :math:`h_j = e_j`, column j of W* is :math:`\log p_{j,z} - \mathrm{mean}_{S_j}\log p` on
    :math:`S_j` and 0 off it; column j of :math:`W^{mm}` is :math:`(V-k_j)/V` on :math:`S_j` and
    :math:`-k_j/V` off it (equal on the support by (6a); margin exactly 1)."""
    V, m = inst.V, inst.m
    Ws, Wmm = np.zeros((V, m)), np.zeros((V, m))
    for j in range(m):
        S = inst.support(j)
        k = S.size
        lp = np.log(inst.probs[j, S])
        Ws[S, j] = lp - lp.mean()
        Wmm[:, j] = -k / V
        Wmm[S, j] = (V - k) / V
    return Ws, Wmm


def paired_instance(rng: np.random.Generator) -> NTPInstance:
    """Contexts come in pairs (h, -h) with the same support: a direction that raises in-support logits
    for one lowers them for the other, so CE has a finite minimiser and the data are not separable."""
    h = rng.standard_normal((3, 4))
    C = np.zeros((6, 5), dtype=np.int64)
    for j in range(3):
        S = rng.choice(5, size=2, replace=False)
        C[j, S] = rng.integers(1, 9, size=2)
        C[j + 3, S] = rng.integers(1, 9, size=2)
    return NTPInstance.from_counts(np.concatenate([h, -h]), C)


def loop_min_margin(inst: NTPInstance, W: np.ndarray) -> float:
    """Smallest (6b) margin, by explicit loops over contexts and off-support tokens."""
    best = np.inf
    for j in range(inst.m):
        logits = W @ inst.embeddings[j]
        z = int(inst.support(j)[0])
        for v in range(inst.V):
            if v not in inst.support(j):
                best = min(best, logits[z] - logits[v])
    return float(best)


def loop_ntp_margin(inst: NTPInstance, W: np.ndarray) -> float:
    """The NTP margin min_j (min_{z in S_j} - max_{v not in S_j}) of the logits, by explicit loops."""
    best = np.inf
    for j in range(inst.m):
        logits = W @ inst.embeddings[j]
        S = set(int(z) for z in inst.support(j))
        for z in S:
            for v in range(inst.V):
                if v not in S:
                    best = min(best, logits[z] - logits[v])
    return float(best)


def test_normalized_margin_takes_every_support_token_not_an_anchor():
    """Off (6a) the in-support logits differ: the anchor's (6b) rows overstate the margin, the NTP margin
    does not."""
    h = np.eye(2)
    C = np.array([[1, 1, 0], [0, 1, 1]])  # S_0 = {0, 1}, S_1 = {1, 2}
    inst = NTPInstance.from_counts(h, C)
    lim = Limits.compute(inst)
    W = np.array([[5.0, 0.0], [2.0, 4.0], [0.0, 3.0]])  # context 0: logits 5, 2, 0; context 1: 0, 4, 3
    f = metrics(W, lim)
    nW = np.linalg.norm(W)
    assert f["normalized_margin"] == pytest.approx(min(2.0 - 0.0, 3.0 - 0.0) / nW, rel=1e-12)
    assert loop_ntp_margin(inst, W) == pytest.approx(2.0)
    assert loop_min_margin(inst, W) == pytest.approx(4.0)  # the anchor (token 0, token 1) reads 5 - 0 and 4 - 0
    assert "min_margin" not in f


# ---------------------------------------------------------------------------- grid
def test_geometric_grid():
    g = geometric_grid(10_000, 20)
    assert g[0] == 0 and g[-1] == 10_000
    assert np.all(np.diff(g) > 0)
    assert 70 <= g.size <= 100  # about 20 per decade over four decades, plus the dense start
    assert np.array_equal(geometric_grid(0), [0])
    assert np.array_equal(geometric_grid(3, 20), [0, 1, 2, 3])
    for bad in (-1, 2.5, True):
        with pytest.raises(InputError, match="steps"):
            geometric_grid(bad)
    with pytest.raises(InputError, match="per_decade"):
        geometric_grid(10, 0)


# ---------------------------------------------------------------------------- metric definitions
def test_limits_match_closed_forms(rng):
    inst = onehot_instance(rng)
    lim = Limits.compute(inst, norms=("max",))
    Ws, Wmm = closed_forms(inst)
    assert lim.compatible is True
    assert np.max(np.abs(lim.W_star - Ws)) <= TOL["linalg"] * 10
    assert np.max(np.abs(lim.W_mm - Wmm)) <= TOL["kkt"]
    assert lim.entropy == pytest.approx(inst.entropy())


@pytest.mark.parametrize("t", [0.5, 3.0, 40.0])
def test_metrics_on_the_limit_ray(rng, t):
    """At W = W* + t·W^mm every metric has a value we can write down."""
    inst = onehot_instance(rng)
    lim = Limits.compute(inst)
    Ws, Wmm = closed_forms(inst)
    W = Ws + t * Wmm
    f = metrics(W, lim)
    nW = np.linalg.norm(W)
    perp = t * np.linalg.norm(Wmm) / nW
    tol = TOL["kkt"]
    assert f["cos_mm_centered"] == pytest.approx(1.0, abs=tol)
    assert f["dist_F"] == pytest.approx(0.0, abs=tol)
    assert f["rel_dist_F"] == pytest.approx(0.0, abs=tol)
    assert f["perp_fraction"] == pytest.approx(perp, abs=tol)
    assert f["cos_mm"] == pytest.approx(perp, abs=tol)  # W* ⟂ W^mm
    assert f["margin_ratio"] == pytest.approx(1.0, abs=tol)
    expect_margin = loop_ntp_margin(inst, W) / nW
    assert f["normalized_margin"] == pytest.approx(expect_margin, abs=tol)
    assert expect_margin == pytest.approx(
        (min(Ws[z, j] for j in range(inst.m) for z in inst.support(j)) + t) / nW, abs=tol)
    b = KeslerSystem.build(inst).log_odds()
    assert f["eq_violation"] == pytest.approx(np.abs(b).max() / nW, abs=tol)
    assert f["norm"] == pytest.approx(nW)
    assert f["excess_loss"] == pytest.approx(inst.loss(W) - inst.entropy(), abs=1e-12)


def test_metrics_match_direct_definitions_at_random_points(rng):
    inst = random_instance(rng, m=5, d=8, V=4, kmin=1, kmax=3)
    lim = Limits.compute(inst, norms=("max", "spectral"))
    basis = lim.subspace.basis()  # orthonormal basis of F, shape (dim F, V, d)
    for _ in range(3):
        W = 3.0 * rng.standard_normal((inst.V, inst.d))
        f = metrics(W, lim)
        PF = np.tensordot(np.tensordot(basis, W, axes=([1, 2], [0, 1])), basis, axes=(0, 0))
        Wp = W - PF
        cos = lambda A, B: float(np.sum(A * B) / (np.linalg.norm(A) * np.linalg.norm(B)))  # noqa: E731
        assert f["cos_mm"] == pytest.approx(cos(W, lim.W_mm), abs=1e-12)
        assert f["cos_mm_centered"] == pytest.approx(cos(W - lim.W_star, lim.W_mm), abs=1e-12)
        assert f["dist_F"] == pytest.approx(np.linalg.norm(PF - lim.W_star), rel=1e-9)
        assert f["normalized_margin"] == pytest.approx(loop_ntp_margin(inst, W) / np.linalg.norm(W), rel=1e-9)
        assert f["margin_ratio"] == pytest.approx(
            loop_min_margin(inst, Wp) * np.linalg.norm(lim.W_mm) / np.linalg.norm(Wp), rel=1e-9)
        sol = lim.norm_svms["max"]
        assert f["margin_ratio_max"] == pytest.approx(loop_min_margin(inst, Wp) * sol.value / np.abs(Wp).max(), rel=1e-9)
        assert f["cos_spectral_centered"] == pytest.approx(cos(W - lim.W_star, lim.norm_svms["spectral"].W), abs=1e-12)
        # a (6a)-feasible point cannot beat the max margin in any norm
        for key in ("margin_ratio", "margin_ratio_max", "margin_ratio_spectral"):
            assert f[key] <= 1.0 + TOL["kkt"]
    assert metric_names(lim)[: len(BASE_METRICS)] == BASE_METRICS


def test_metrics_at_zero_are_nan_not_errors(rng):
    inst = random_instance(rng, m=4, d=6, V=4, kmin=1, kmax=3)
    f = metrics(np.zeros((inst.V, inst.d)), Limits.compute(inst))
    assert f["norm"] == 0.0 and np.isnan(f["cos_mm"]) and np.isnan(f["normalized_margin"])
    assert f["excess_loss"] > 0


# ---------------------------------------------------------------------------- behaviour
def test_separable_trajectory_moves_towards_the_limits(rng):
    inst = onehot_instance(rng, m=4, V=5)
    traj = run(inst, O.gd(), 5000)
    s = traj.steps
    early = int(np.searchsorted(s, 50))
    for key in ("norm", "cos_mm", "cos_mm_centered", "margin_ratio"):
        assert traj[key][-1] > traj[key][early]
    assert traj["rel_dist_F"][-1] < traj["rel_dist_F"][early]
    assert np.all(np.diff(traj["excess_loss"][1:]) <= 1e-15)
    assert traj["cos_mm_centered"][-1] > 0.99


OPTIMIZERS = [
    O.gd(),
    O.ngd(0.1, schedule="inv-sqrt"),
    O.ngd(0.05),
    O.adam(0.05),
    O.sign(0.05, schedule="inv-sqrt"),
    O.spectral(0.1, schedule="inv-sqrt"),
    O.muon(0.02, schedule="inv-sqrt"),
]


def test_non_separable_norm_stays_bounded(rng):
    inst = paired_instance(rng)
    assert decide_separability(KeslerSystem.build(inst))[0].holds is False
    lim = Limits.compute(inst)
    assert lim.svm is None and "separable" in lim.svm_error
    gd_traj = run(inst, O.gd(), 5_000, limits=lim)
    # GD converges to a finite minimiser: its gradient vanishes and its norm settles
    assert gd_traj["grad_norm"][-1] < 1e-10
    bound = float(gd_traj["norm"][-1])
    assert np.isnan(gd_traj["cos_mm"][-1])
    for opt in OPTIMIZERS[1:]:
        traj = run(inst, opt, 5_000, limits=lim)
        assert np.max(traj["norm"]) <= 1.25 * bound, opt.name
    # the same optimiser on separable data keeps growing: the check above could fail
    sep = run(onehot_instance(rng), O.gd(), 5_000)
    assert sep["norm"][-1] > 1.25 * sep["norm"][int(np.searchsorted(sep.steps, 500))]


def test_run_options_and_outputs(rng):
    inst = random_instance(rng, m=4, d=7, V=4, kmin=1, kmax=3)
    lim = Limits.compute(inst, norms=("max",))
    traj = run(inst, O.adam(0.05), 300, limits=lim, grid=[0, 10, 100], snapshots=True, progress=True)
    assert list(traj.steps) == [0, 10, 100, 300]
    assert traj.snapshots.shape == (4, inst.V, inst.d)
    assert np.array_equal(traj.snapshots[-1], traj.W_final)
    assert np.array_equal(traj.snapshots[0], np.zeros((inst.V, inst.d)))
    rows = list(csv.DictReader(io.StringIO(traj.to_csv())))
    assert [int(r["step"]) for r in rows] == [0, 10, 100, 300]
    assert float(rows[-1]["cos_max"]) == traj.final()["cos_max"]
    js = json.loads(json.dumps(traj.to_json()))
    assert js["hyperparams"]["beta2"] == 0.99 and js["hyperparams"]["steps"] == 300
    assert js["final"]["norm"] == pytest.approx(np.linalg.norm(traj.W_final))
    W0 = rng.standard_normal((inst.V, inst.d))
    t2 = run(inst, O.ngd(0.01), 1, limits=lim, W0=W0)
    assert t2.metrics["norm"][0] == pytest.approx(np.linalg.norm(W0))
    assert t2.hyperparams["start"] == "given"


def test_run_rejects_bad_input(rng):
    inst = random_instance(rng, m=4, d=7, V=4, kmin=1, kmax=3)
    other = random_instance(rng, m=4, d=7, V=4, kmin=1, kmax=3)
    with pytest.raises(InputError, match="limits"):
        run(inst, O.gd(), 5, limits=Limits.compute(other))
    with pytest.raises(InputError, match="optimizer"):
        run(inst, "gd", 5)
    with pytest.raises(InputError, match="grid"):
        run(inst, O.gd(), 5, grid=[0, 9])
    with pytest.raises(InputError, match="W"):
        run(inst, O.gd(), 5, W0=np.zeros((2, 2)))
    with pytest.raises(InputError, match="norms"):
        Limits.compute(inst, norms=("fro",))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_run_stops_on_a_non_finite_iterate(rng):
    inst = random_instance(rng, m=4, d=7, V=4, kmin=1, kmax=3)
    with pytest.raises(SolverError, match="not finite"):
        run(inst, O.gd(0.1), 3, W0=np.full((inst.V, inst.d), 1e308))


# ---------------------------------------------------------------------------- commands
def _write_instance(tmp_path, inst: NTPInstance) -> str:
    path = tmp_path / "inst.json"
    path.write_text(json.dumps({"embeddings": inst.embeddings.tolist(), "counts": inst.counts.tolist()}))
    return str(path)


def test_trajectory_command_writes_everything(tmp_path, rng, capsys):
    from ntpcert.cli.app import main

    data = _write_instance(tmp_path, random_instance(rng, m=5, d=8, V=4, kmin=1, kmax=3))
    out = tmp_path / "run"
    rc = main(["trajectory", data, "--optimizer", "sign", "--schedule", "inv-sqrt", "--lr", "0.1",
               "--steps", "500", "--out", str(out), "--json"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    files = set(os.listdir(out))
    assert {"metrics.csv", "trajectory.json", "W_final.npy", "trajectory.png", "alignment.png"} <= files
    assert summary["hyperparams"] == {"optimizer": "sign", "schedule": "inv-sqrt", "lr": 0.1, "momentum": 0.0,
                                      "steps": 500, "start": "zeros"}
    assert "margin_ratio_max" in summary["final"]  # sign descent compares with its own norm by default
    W = np.load(out / "W_final.npy")
    assert W.shape == (4, 8)
    full = json.loads((out / "trajectory.json").read_text())
    assert full["limits"]["norm_svms"]["max"]["relative_gap"] < TOL["kkt"] * 10
    assert full["final"]["norm"] == pytest.approx(np.linalg.norm(W))


@pytest.mark.parametrize(
    "extra, field",
    [
        (["--optimizer", "nadam"], "optimizer"),
        (["--optimizer", "gd", "--beta1", "0.5"], "beta1"),
        (["--lr", "-1"], "lr"),
        (["--steps", "0"], "steps"),
        (["--norms", "max,frobenius"], "norms"),
        (["--schedule", "cosine"], "schedule"),
    ],
)
def test_trajectory_command_bad_input(tmp_path, rng, capsys, extra, field):
    from ntpcert.cli.app import main

    data = _write_instance(tmp_path, random_instance(rng, m=3, d=5, V=3, kmin=1, kmax=2))
    out = tmp_path / "bad"
    assert main(["trajectory", data, "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0]
    assert not out.exists()


def test_trajectory_command_refuses_file_as_out(tmp_path, rng, capsys):
    from ntpcert.cli.app import main

    data = _write_instance(tmp_path, random_instance(rng, m=3, d=5, V=3, kmin=1, kmax=2))
    target = tmp_path / "file.txt"
    target.write_text("keep me")
    assert main(["trajectory", data, "--out", str(target)]) == 2
    assert target.read_text() == "keep me"


def test_reproduce_paper_short(tmp_path, capsys):
    from ntpcert.cli.app import main

    out = tmp_path / "rep"
    assert main(["reproduce", "paper", "--out", str(out), "--steps", "300", "--no-extras", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    files = set(os.listdir(out))
    assert {"fig3_gd.png", "fig4_ngd.png", "fig5_adam.png", "fig_compare.png", "summary.md", "summary.json",
            "metrics_gd.csv", "metrics_ngd.csv", "metrics_adam.csv"} <= files
    hp = summary["hyperparams"]
    assert hp["gd"]["lr"] == 0.5 and hp["ngd"]["lr"] == 0.01
    assert (hp["adam"]["lr"], hp["adam"]["beta1"], hp["adam"]["beta2"], hp["adam"]["eps"]) == (0.01, 0.9, 0.99, 1e-8)
    md = (out / "summary.md").read_text()
    for text in ("| gd | gd | constant | 0.5 |", "beta1=0.9, beta2=0.99, eps=1e-08", "Final values after 300 steps"):
        assert text in md
    assert summary["final"]["ngd"]["norm"] <= 0.01 * 300 + 1e-9  # NGD moves by exactly eta per step
    for name in ("fig3_gd.png", "fig_compare.png"):
        assert (out / name).stat().st_size < 300_000


def test_reproduce_rejects_unknown_experiment(tmp_path, capsys):
    from ntpcert.cli.app import main

    assert main(["reproduce", "cifar", "--out", str(tmp_path / "x")]) == 2
    assert "EXPERIMENT" in capsys.readouterr().err


@pytest.mark.slow
def test_reproduce_paper_full(tmp_path, capsys):
    """The full default run: 10^4 steps, extras and the regularisation path."""
    from ntpcert.cli.app import main

    out = tmp_path / "rep"
    assert main(["reproduce", "paper", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    f = summary["final"]
    # NGD and Adam are ahead of GD, as the paper reports
    for key in ("cos_mm", "cos_mm_centered"):
        assert f["ngd"][key] > f["gd"][key] and f["adam"][key] > f["gd"][key]
    assert f["adam"]["rel_dist_F"] < 1e-2
    rp = summary["regpath"]
    last = max(i for i, ok in enumerate(rp["certified"]) if ok)  # budgets past float64's reach are marked
    assert rp["cos_mm"][last] > 0.99 and rp["rel_dist_F"][last] < 1e-2 and rp["kkt"][last] <= rp["kkt_max"]
    th2 = summary["convergence_checks"]["theorem2"]  # 10^6 steps: GD passes Theorem 2's checks, Adam fails
    assert all(th2["gd"]["verdicts"][k] for k in ("decade_increment", "F_convergence", "path_cosine"))
    assert th2["adam"]["verdicts"]["decade_increment"] is False and th2["adam"]["verdicts"]["path_cosine"] is False
    assert "As the control should, Adam fails" in (out / "summary.md").read_text()
    for name in ("fig_norms.png", "fig_regpath.png", "fig_checks.png"):
        assert (out / name).stat().st_size < 300_000
