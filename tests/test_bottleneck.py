"""The softmax bottleneck (``ntpcert bottleneck``): every token's argmaxability under a fixed decoder, against a
QHull reference, with exact witnesses, a certificate whose forgeries are refused, and the command line."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from ntpcert.cli.app import main
from ntpcert.exact.argmax import ArgmaxScreen, exact_column_values
from ntpcert.geometry.bottleneck import argmaxability, check_bottleneck_certificate
from ntpcert.geometry.bottleneck.result import ARGMAXABLE, UNARGMAXABLE, UNDETERMINED


def reference(W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Argmaxable tokens by QHull, for points in general position: without a bias the vertices of the hull of
    the rows; with one, the vertices of the lifted points (w_u, b_u) that lie on a facet whose outer normal
    points up (their normal cone then meets {(h, 1)}). At most d + 1 rows in general position are all
    argmaxable (affinely independent)."""
    V, d = W.shape
    P = W if b is None else np.hstack([W, b[:, None]])
    if V <= d + 1:
        return np.ones(V, dtype=bool)
    if P.shape[1] == 1:
        out = np.zeros(V, dtype=bool)
        out[[int(np.argmax(P[:, 0])), int(np.argmin(P[:, 0]))]] = True
        return out
    hull = ConvexHull(P)
    out = np.zeros(V, dtype=bool)
    if b is None:
        out[hull.vertices] = True
    else:
        normal_last = hull.equations[:, -2]
        assert np.all(np.abs(normal_last) > 1e-9), "a vertical facet: not in general position"
        out[np.unique(hull.simplices[normal_last > 0])] = True
    return out


def random_decoder(rng: np.random.Generator, d: int, V: int, bias: bool, interior: int = 0):
    """Gaussian rows and bias; the last ``interior`` rows replaced by convex combinations (Dirichlet weights) of
    the first ones, with a bias below the combined bias: strictly inside, never argmaxable."""
    W = rng.standard_normal((V, d))
    b = rng.standard_normal(V) if bias else None
    for j in range(interior):
        lam = rng.dirichlet(np.ones(V - interior))
        W[V - 1 - j] = lam @ W[: V - interior]
        if b is not None:
            b[V - 1 - j] = lam @ b[: V - interior] - 0.5 - rng.random()
    return W, b


@pytest.mark.parametrize("d, V, bias, interior", [(2, 30, False, 4), (3, 40, False, 5), (5, 40, False, 3),
                                                  (8, 40, False, 2), (2, 25, True, 3), (4, 40, True, 5),
                                                  (7, 40, True, 2), (1, 12, True, 2)])
def test_verdicts_agree_with_qhull_on_every_token(d, V, bias, interior):
    rng = np.random.default_rng(100 * d + V + bias)
    for _ in range(3):
        W, b = random_decoder(rng, d, V, bias, interior)
        res = argmaxability(W, b)
        assert not res.undetermined
        ref = reference(W, b)
        assert np.array_equal(res.verdict == ARGMAXABLE, ref), np.flatnonzero((res.verdict == ARGMAXABLE) != ref)
        if interior:
            assert set(range(V - interior, V)) <= set(res.unargmaxable)


def test_unargmaxable_counts_of_100_random_decoders_match_qhull():
    rng = np.random.default_rng(2024)
    seen_unargmaxable = 0
    for _ in range(100):
        d, V, bias = int(rng.integers(1, 9)), int(rng.integers(2, 41)), bool(rng.integers(0, 2))
        interior = int(rng.integers(0, 4)) if V > d + 4 else 0
        W, b = random_decoder(rng, d, V, bias, interior)
        res = argmaxability(W, b)
        ref = reference(W, b)
        assert len(res.unargmaxable) == int(np.sum(~ref)), (d, V, bias)
        assert not res.undetermined
        seen_unargmaxable += len(res.unargmaxable)
    assert seen_unargmaxable > 50  # the stream does hold unargmaxable tokens


def test_boundary_points_duplicates_and_bias_are_exact():
    rng = np.random.default_rng(5)
    W = rng.integers(-100, 101, size=(20, 3)).astype(float) * 2  # even integers: midpoints are exact
    V = W.shape[0]
    hull = ConvexHull(W)
    a, c = hull.simplices[0][:2]  # an edge of a facet: its midpoint is on the boundary, not a vertex
    assert not any(np.array_equal(row, (W[a] + W[c]) / 2) for row in W)
    W = np.vstack([W, (W[a] + W[c]) / 2, W[hull.vertices[0]]])
    res = argmaxability(W)
    mid, dup = V, V + 1
    assert res.verdict[mid] == UNARGMAXABLE and res.witnesses.kind(mid) == "farkas"
    support, weights = res.witnesses.farkas[mid]
    assert sum(weights) == 1 and all(x > 0 for x in weights) and len(support) <= 4
    combo = [sum(Fraction(float(W[u, j])) * x for u, x in zip(support, weights)) for j in range(3)]
    assert combo == [Fraction(float(t)) for t in W[mid]]
    assert res.witnesses.kind(dup) == "duplicate" and res.verdict[hull.vertices[0]] == UNARGMAXABLE
    # with a bias, the same row wins once its bias is above its twin's, and loses below it
    b = np.zeros(W.shape[0])
    b[dup] = 1.0
    assert argmaxability(W, b).verdict[dup] == ARGMAXABLE
    b[dup] = -1.0
    r = argmaxability(W, b)
    assert r.verdict[dup] == UNARGMAXABLE and r.witnesses.kind(dup) == "farkas"


def test_screen_names_exact_argmaxes_and_refuses_exact_ties():
    rng = np.random.default_rng(7)
    W = rng.standard_normal((300, 6))
    W[0] = W[1] = 5.0  # an exact tie at the top for g = (1, ..., 1)
    W[3] = -5.0
    W[2] = W[3] - np.ldexp(1.0, -45)  # ahead of row 3 by a hair for g = -(1, ..., 1)
    G = np.rint(rng.standard_normal((6, 200)) * 30)
    G[:, 0], G[:, 1] = 1.0, -1.0
    unique = []
    for j in range(G.shape[1]):
        vals, _ = exact_column_values(W, G[:, j])
        winners = [u for u, x in enumerate(vals) if x == max(vals)]
        unique.append(winners[0] if len(winners) == 1 else -1)
    unique = np.array(unique)
    assert 50 < np.sum(unique >= 0) < G.shape[1]
    for dtype in (np.float32, np.float64):
        got = ArgmaxScreen.of(W).certify(G, dtype=dtype)
        assert np.all((got == -1) | (got == unique))  # never a wrong name
        assert got[0] == -1 and got[1] == 2
        assert np.sum(got >= 0) >= 0.9 * np.sum(unique >= 0)
    assert np.array_equal(ArgmaxScreen.of(W).certify(G, dtype=np.float64), unique)


def test_certificate_round_trip_and_forgeries_refused():
    rng = np.random.default_rng(11)
    W, b = random_decoder(rng, 3, 30, True, 3)
    W[5] = W[6]
    b[5] = b[6]
    res = argmaxability(W, b)
    cert = json.loads(json.dumps(res.certificate(W, b)))
    ok = check_bottleneck_certificate(cert, W, b)
    assert ok.valid and ok.problems == ()
    assert list(ok.unargmaxable) == res.unargmaxable and len(ok.argmaxable) == 30 - len(res.unargmaxable)
    assert {5, 6} <= set(ok.unargmaxable)

    def forged(edit) -> tuple[bool, tuple]:
        c = json.loads(json.dumps(cert))
        edit(c)
        out = check_bottleneck_certificate(c, W, b)
        return out.valid, out.problems

    v_no = res.unargmaxable[-1]
    assert res.witnesses.kind(v_no) == "farkas"

    def drop_combination(c):
        c["combinations"] = [x for x in c["combinations"] if x["token"] != v_no]

    def claim_row(c):  # an unargmaxable token claimed argmaxable by its own row direction
        drop_combination(c)
        for key, value in (("tokens", v_no), ("sources", v_no), ("bits", 20), ("c", 1)):
            c["rows"][key].append(value)

    valid, why = forged(claim_row)
    assert not valid and "unique argmax" in why[0]

    def claim_point(c):
        drop_combination(c)
        c["points"].append({"token": v_no, "x": [0.0, 0.0, 0.0, 1.0]})

    valid, why = forged(claim_point)
    assert not valid and "its point" in why[0]

    def bump(c):
        item = c["combinations"][0]
        item["numerators"][0] = str(int(item["numerators"][0]) + 1)

    valid, why = forged(bump)
    assert not valid and "sum 1" in why[0]

    def move_weight(c):  # still positive with sum 1, but not the row
        item = next(x for x in c["combinations"] if len(x["support"]) >= 2)
        n0, n1 = int(item["numerators"][0]), int(item["numerators"][1])
        item["numerators"][0], item["numerators"][1] = str(n0 + n1 - 1), "1"

    valid, why = forged(move_weight)
    assert not valid and "coordinate" in why[0]
    valid, why = forged(lambda c: c["duplicates"][0].__setitem__("twin", (c["duplicates"][0]["twin"] + 1) % 30))
    assert not valid and "identical" in why[0]

    def leave_out(c):
        for key in ("tokens", "sources", "bits", "c"):
            c["rows"][key].pop()

    valid, why = forged(leave_out)
    assert not valid and "no verdict" in why[0]
    valid, why = forged(lambda c: c["undetermined"].append({"token": 0, "why": ""}))
    assert not valid and "twice" in why[0]
    W2 = W.copy()
    W2[0, 0] += 1e-9
    assert "SHA-256" in check_bottleneck_certificate(cert, W2, b).problems[0]
    assert not check_bottleneck_certificate({"format": "x"}, W, b).valid


def test_lp_budget_leaves_tokens_undetermined_with_what_settles_them():
    rng = np.random.default_rng(3)
    W, _ = random_decoder(rng, 3, 30, False, 3)
    res = argmaxability(W, max_lp_tokens=0)
    assert set(range(27, 30)) <= set(res.undetermined)
    assert all("--max-lp-tokens" in res.witnesses.why[v] for v in res.undetermined)
    assert (res.verdict == UNDETERMINED).sum() == len(res.undetermined)
    cert = res.certificate(W, None)
    assert check_bottleneck_certificate(cert, W).valid


def test_single_token_and_bad_input():
    from ntpcert.errors import InputError

    assert argmaxability(np.array([[1.0, 2.0]])).verdict.tolist() == [ARGMAXABLE]
    with pytest.raises(InputError, match=r"entry \[1, 0\]"):
        argmaxability(np.array([[1.0], [np.nan]]))
    with pytest.raises(InputError, match="shape"):
        argmaxability(np.ones(3))
    with pytest.raises(InputError, match="b: expected"):
        argmaxability(np.ones((3, 2)), np.ones(2))


def test_cli_json_certificate_and_check(tmp_path, capsys):
    rng = np.random.default_rng(4)
    W, _ = random_decoder(rng, 4, 30, False, 3)
    np.save(tmp_path / "W.npy", W)
    cert = tmp_path / "cert.json"
    assert main(["bottleneck", str(tmp_path / "W.npy"), "--json", "--certificate-out", str(cert)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["V"] == 30 and out["d"] == 4 and out["bias"] is False
    assert out["unargmaxable"] == argmaxability(W).unargmaxable and {27, 28, 29} <= set(out["unargmaxable"])
    assert out["counts"]["argmaxable"] + out["counts"]["unargmaxable"] == 30
    assert [t["id"] for t in out["tokens"]] == list(range(30))
    assert all(t["argmaxable"] is (t["id"] not in out["unargmaxable"]) for t in out["tokens"])
    assert {t["witness"] for t in out["tokens"]} <= {"row", "found", "lp", "farkas"}
    assert set(out["timings"]) >= {"rows", "lp", "total"} and out["certificate"] == str(cert)
    assert main(["bottleneck", str(tmp_path / "W.npy"), "--check", str(cert)]) == 0
    assert capsys.readouterr().out.startswith("VALID")
    c = json.loads(cert.read_text())
    c["combinations"][0]["numerators"][0] = "1"
    cert.write_text(json.dumps(c))
    assert main(["bottleneck", str(tmp_path / "W.npy"), "--check", str(cert)]) == 3
    assert capsys.readouterr().out.startswith("INVALID")
    assert main(["bottleneck", str(tmp_path / "W.npy")]) == 0
    text = capsys.readouterr().out
    assert f"unargmaxable {len(out['unargmaxable'])}," in text and "27, 28, 29" in text


@pytest.mark.parametrize("bad, message", [
    (lambda p: np.save(p, np.array([[1.0, np.nan], [0.0, 1.0]])), "entry [0, 1] is nan"),
    (lambda p: np.save(p, np.ones(4)), "2-d"),
    (lambda p: p.write_bytes(b"not an npy file"), "readable"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, bad, message):
    path = tmp_path / "W.npy"
    bad(path)
    assert main(["bottleneck", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_usage_errors(tmp_path, capsys):
    np.save(tmp_path / "W.npy", np.eye(3))
    assert main(["bottleneck"]) == 2
    assert main(["bottleneck", str(tmp_path / "W.npy"), "--model", str(tmp_path)]) == 2
    np.save(tmp_path / "b.npy", np.ones(2))
    assert main(["bottleneck", str(tmp_path / "W.npy"), "--bias", str(tmp_path / "b.npy")]) == 2
    assert "shape (2,)" in capsys.readouterr().err


def test_cli_model_heads_tied_and_with_bias(tmp_path, capsys):
    pytest.importorskip("transformers")
    from ntpcert.instance.lm.head import read_model_head

    from .lm_models import tiny_model

    gpt2 = tiny_model(tmp_path, "gpt2", vocab=60, d=4)
    head = read_model_head(gpt2)
    assert head.b is None and head.source["tied"] is True and head.W.shape[1] == 4
    assert main(["bottleneck", "--model", gpt2, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["V"] == head.W.shape[0] and out["bias"] is False
    assert out["unargmaxable"] == argmaxability(head.W).unargmaxable
    gptj = tiny_model(tmp_path, "gptj", vocab=60, d=4)
    head = read_model_head(gptj)
    assert head.b is not None and head.source["bias"] == "lm_head.bias"
    assert main(["bottleneck", "--model", gptj, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bias"] is True and out["counts"]["undetermined"] == 0
    assert np.sum(reference(head.W, head.b)) == out["counts"]["argmaxable"]


def test_cli_safetensors_head_with_bias_and_npy_bias_agree(tmp_path, capsys):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(9)
    W, b = random_decoder(rng, 3, 25, True, 3)
    safetensors_numpy.save_file({"lm_head.weight": W.astype(np.float32), "lm_head.bias": b.astype(np.float32),
                                 "other.weight": np.ones((2, 2), np.float32)}, str(tmp_path / "head.safetensors"))
    W32, b32 = W.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    np.save(tmp_path / "W.npy", W32)
    np.save(tmp_path / "b.npy", b32)
    assert main(["bottleneck", str(tmp_path / "head.safetensors"), "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main(["bottleneck", str(tmp_path / "W.npy"), "--bias", str(tmp_path / "b.npy"), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert a["bias"] is c["bias"] is True and a["source"]["bias"] == "lm_head.bias"
    assert a["unargmaxable"] == c["unargmaxable"] == argmaxability(W32, b32).unargmaxable
    assert len(a["unargmaxable"]) == int(np.sum(~reference(W32, b32)))
