"""The command line: JSON contract, files written, and a table of bad inputs (exit 2, one line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ntpcert.cli.app import main
from ntpcert.instance.io import write_npz

from .conftest import random_instance


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_certify_paper_json(capsys):
    code, out, err = run(["certify", "paper", "--json"], capsys)
    assert code == 0
    j = json.loads(out)
    assert (j["m"], j["d"], j["V"]) == (50, 60, 10)
    assert 1.0 < j["entropy"] < 2.0
    # Lemma 1: d = 60 > m = 50 with Gaussian embeddings
    assert j["compatible"]["holds"] is True and j["compatible"]["residual"] < 1e-8
    assert j["separable"]["holds"] is True
    assert j["entropy_bound_reachable"] is True
    svm = j["svm"]
    assert svm["norm"] > 0 and svm["primal_residual"] < 1e-6 and svm["dual_residual"] < 1e-6
    assert abs(svm["gap"]) <= 1e-6 * max(1.0, svm["objective"])
    assert j["W_mm_norm"] == svm["norm"]


def test_certify_text_corpus_onehot_concat(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("the cat sat on the mat. the dog sat on the log. a cat and a dog sat.\n" * 3)
    code, out, _ = run(["certify", str(text), "--tokenizer", "word", "-k", "2", "--embedding", "onehot-concat", "--json"], capsys)
    assert code == 0
    j = json.loads(out)
    assert j["compatible"]["holds"] in (True, False)
    assert j["separable"]["holds"] in (True, False)
    assert j["entropy_bound_reachable"] in (True, False)
    assert j["d"] == 2 * j["V"]


def test_svm_out_and_limits_files(tmp_path, capsys, rng):
    inst = random_instance(rng, 5, 7, 4, kmin=1, kmax=3)
    data = tmp_path / "inst.npz"
    write_npz(inst, data)
    wpath = tmp_path / "W.npy"
    code, out, _ = run(["svm", str(data), "--out", str(wpath), "--json"], capsys)
    assert code == 0
    j = json.loads(out)
    W = np.load(wpath)
    assert W.shape == (4, 7)
    assert np.isclose(np.linalg.norm(W), j["norm"])
    for key in ("norm", "objective", "primal_residual", "dual_residual", "gap"):
        assert key in j
    outdir = tmp_path / "lim"
    code, out, _ = run(["limits", str(data), "--out", str(tmp_path / "nobasis"), "--json"], capsys)
    assert code == 0
    assert sorted(os.listdir(tmp_path / "nobasis")) == ["W_mm.npy", "W_star.npy", "summary.json"]
    assert "--basis" in json.loads(out)["F_basis_skipped"]
    # --out-dir is the folder's name; --out (above) stays accepted for the folder commands
    code, out, _ = run(["limits", str(data), "--out-dir", str(outdir), "--basis", "--json"], capsys)
    assert code == 0
    assert sorted(os.listdir(outdir)) == ["F_basis.npy", "W_mm.npy", "W_star.npy", "summary.json"]
    basis = np.load(outdir / "F_basis.npy")
    summary = json.loads((outdir / "summary.json").read_text())
    assert basis.shape == (summary["compatible"]["dim_F"], 4, 7)
    assert np.allclose(np.load(outdir / "W_mm.npy"), W, atol=1e-6)


def test_info_runs(capsys):
    code, out, _ = run(["info", "dyck", "--json"], capsys)
    assert code == 0 and json.loads(out)["V"] >= 4


def test_not_separable_svm_reports_and_exits_zero(tmp_path, capsys):
    h = [1.0, 2.0]
    data = tmp_path / "dup.json"
    data.write_text(json.dumps({"embeddings": [h, h], "counts": [[1, 0, 0], [0, 1, 0]]}))
    code, out, _ = run(["svm", str(data), "--json"], capsys)
    j = json.loads(out)
    assert code == 0 and j["separable"] is False
    # the structured solver's Farkas ray comes with the answer
    assert j["certificate"]["kind"] == "farkas_ray" and j["certificate"]["verified_exactly"] is True


# ------------------------------------------------------------------------------ bad inputs
def _files(tmp):
    """Write a set of bad input files; return name -> path."""
    p = {}

    def put(name, text=None, data=None):
        path = tmp / name
        if data is not None:
            path.write_bytes(data)
        else:
            path.write_text(text)
        p[name] = str(path)

    put("nan.json", json.dumps({"embeddings": [[float("nan")]] , "counts": [[1, 2]]}).replace("NaN", "NaN"))
    put("negative.json", json.dumps({"embeddings": [[1.0]], "counts": [[1, -3]]}))
    put("empty_support.json", json.dumps({"embeddings": [[1.0], [2.0]], "counts": [[1, 2], [0, 0]]}))
    put("shape.json", json.dumps({"embeddings": [[1.0], [2.0]], "counts": [[1, 2]]}))
    put("missing.json", json.dumps({"embeddings": [[1.0]]}))
    put("badjson.json", "{ not json")
    put("notobject.json", "[1, 2, 3]")
    put("probsum.json", json.dumps({"embeddings": [[1.0]], "probs": [["1/3", "1/3"]], "weights": [1]}))
    put("badfrac.json", json.dumps({"embeddings": [[1.0]], "probs": [["1/x", "1"]], "weights": [1]}))
    put("inf.json", '{"embeddings": [[Infinity]], "counts": [[1, 2]]}')
    put("fraccounts.json", json.dumps({"embeddings": [[1.0]], "counts": [[1.5, 2]]}))
    put("notzip.npz", data=b"this is not a zip archive")
    put("onetoken.json", json.dumps({"embeddings": [[1.0]], "counts": [[4]]}))
    put("empty.txt", "")
    put("emb.npy", data=b"\x93NUMPY garbage")
    return p


BAD_CASES = [
    # (argv template, words the one-line message must contain)
    (["certify", "{nan.json}"], "embeddings"),
    (["certify", "{negative.json}"], "counts[0, 1]"),
    (["certify", "{empty_support.json}"], "empty support"),
    (["certify", "{shape.json}"], "counts"),
    (["certify", "{missing.json}"], "counts"),
    (["certify", "{badjson.json}"], "badjson.json"),
    (["certify", "{notobject.json}"], "notobject.json"),
    (["certify", "{probsum.json}"], "probs[0]"),
    (["certify", "{badfrac.json}"], "probs[0, 0]"),
    (["certify", "{inf.json}"], "embeddings"),
    (["certify", "{fraccounts.json}"], "counts[0, 0]"),
    (["certify", "{notzip.npz}"], "notzip.npz"),
    (["certify", "{onetoken.json}"], "V = 1"),
    (["certify", "{empty.txt}"], "empty.txt"),
    (["certify", "no-such-file-or-builtin"], "no-such-file-or-builtin"),
    (["certify", "paper", "--embedding", "random:zero"], "embedding"),
    (["certify", "pydoc", "-k", "0"], "0"),
    (["certify", "pydoc", "--embedding", "{emb.npy}"], "emb.npy"),
    (["certify", "paper", "--solver", "nope"], "nope"),
    (["svm", "paper", "--out", "/no/such/dir/W.npy"], "/no/such/dir"),
    (["certify"], "DATA"),
    (["frobnicate"], "frobnicate"),
    (["certify", "paper", "--tokenizer", "bytes"], "bytes"),
    (["certify", "paper", "-k", "two"], "two"),
]


def _fill(text: str, files: dict) -> str:
    for name, path in files.items():
        text = text.replace("{" + name + "}", path)
    return text


@pytest.mark.parametrize("argv, needle", BAD_CASES, ids=[" ".join(a) for a, _ in BAD_CASES])
def test_bad_input_exit_2_one_line(argv, needle, tmp_path, capsys):
    files = _files(tmp_path)
    argv = [_fill(a, files) for a in argv]
    needle = _fill(needle, files)
    before = sorted(os.listdir(tmp_path))
    code, out, err = run(argv, capsys)
    assert code == 2, (argv, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in err and out == ""
    assert sorted(os.listdir(tmp_path)) == before  # nothing written


def test_limits_out_is_a_file_exit_2(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = run(["limits", "paper", "--out", str(f)], capsys)
    assert code == 2 and "--out" in err


def test_console_script_exit_codes(tmp_path):
    """The installed entry point (a real process): help is fast, bad input gives 2 without a traceback."""
    ok = subprocess.run([sys.executable, "-m", "ntpcert.cli", "--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "certify" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "ntpcert.cli", "certify", str(tmp_path / "nope.json")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_certify_json_reports_stage_seconds_and_witnesses(capsys):
    code, out, _ = run(["certify", "paper", "--json"], capsys)
    j = json.loads(out)
    assert code == 0 and set(j["stages"]) == {"kesler", "rank", "compatibility", "separability", "svm"}
    assert all(v >= 0 for v in j["stages"].values())
    assert j["compatible"]["engine"] == "lemma1" and j["separable"]["engine"] == "lemma1"
    assert "full row rank" in j["compatible"]["reason"] and "Lemma 1" in j["separable"]["reason"]
    assert j["compatible"]["witness"] == j["separable"]["witness"] == "embeddings-full-rank"


def test_limits_basis_on_the_sparse_path_matches_the_dense_one(tmp_path, capsys, monkeypatch):
    """Above DENSE_MAX_ROWS W* comes from LSMR and dim F is unknown; --basis still writes the basis,
    and W* agrees with the dense path's."""
    from ntpcert.rows import subspace

    code, _, _ = run(["limits", "dyck", "--out", str(tmp_path / "dense"), "--basis"], capsys)
    assert code == 0
    monkeypatch.setattr(subspace, "DENSE_MAX_ROWS", 0)
    code, out, _ = run(["limits", "dyck", "--out", str(tmp_path / "sparse"), "--basis", "--json"], capsys)
    j = json.loads(out)
    assert code == 0 and j["compatible"]["dim_F"] is None and j["compatible"]["least_squares"]["method"] == "lsmr"
    B0, B1 = (np.load(tmp_path / d / "F_basis.npy") for d in ("dense", "sparse"))
    assert B0.shape == B1.shape and B0.shape[0] > 0
    W0, W1 = (np.load(tmp_path / d / "W_star.npy") for d in ("dense", "sparse"))
    assert np.linalg.norm(W0 - W1) <= 1e-7 * max(1.0, np.linalg.norm(W0))


def test_every_command_has_a_description():
    from ntpcert.cli.app import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    missing = [name for name, p in sub.choices.items() if not p.description]
    assert not missing, f"commands without a description: {missing}"


def test_output_options_say_file_or_dir():
    """One name per concept: a file option has the metavar FILE, a folder option DIR (``--out-dir``, with
    ``--out`` accepted as the same option), the time limit is ``--time-limit SECONDS``."""
    from ntpcert.cli.app import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    folders = {"limits", "trajectory", "reproduce", "bench", "geometry"}
    files = {"svm": ["--out"], "sweep-plot": ["--out"], "certify": ["--certificate-out"], "compare": ["--figure", "--table"],
             "sweep": ["--csv"]}
    for name, p in sub.choices.items():
        opts = {o: a for a in p._actions for o in a.option_strings}
        if name in folders:
            assert opts["--out-dir"] is opts["--out"] and opts["--out"].metavar == "DIR", name
            assert opts["--out"].dest == "out_dir", name
        for flag in files.get(name, []):
            assert opts[flag].metavar == "FILE", (name, flag)
        if "--time-limit" in opts:
            assert opts["--time-limit"].metavar == "SECONDS", name
        assert "--time-budget" not in opts, name


@pytest.mark.parametrize("flag", ["--out", "--out-dir"])
def test_folder_commands_take_both_spellings(flag, tmp_path, capsys):
    code, out, _ = run(["trajectory", "paper", "--steps", "5", "--no-plot", "--no-checks", flag, str(tmp_path / "t"),
                        "--json"], capsys)
    assert code == 0 and json.loads(out)["out"] == str(tmp_path / "t")
    assert (tmp_path / "t" / "metrics.csv").is_file()


@pytest.mark.parametrize("progress", [False, True])
def test_bench_progress_lines_only_with_progress(progress, capsys):
    """``bench --progress`` shows one line per instance on stderr; without it (stderr is not a terminal
    here) stderr stays empty."""
    argv = ["bench", "--scale", "tiny", "--families", "paper", "--backends", "structured", "--seeds", "1", "--json"]
    code, out, err = run(argv + (["--progress"] if progress else []), capsys)
    assert code == 0 and "summary" in json.loads(out)
    assert bool(err.strip()) is progress


def test_library_defaults_equal_the_command_line_ones():
    """A user of both gets the same thing: ``certify`` / ``exact_certify`` without arguments do what
    ``ntpcert certify [--exact]`` does without options (no excess bracket, the float gap of the NTP-SVM in
    the float verdicts, the same solvers)."""
    import inspect

    from ntpcert.cli.app import build_parser
    from ntpcert.pipeline.exact_verdicts import exact_certify
    from ntpcert.pipeline.float_verdicts import certify

    args = build_parser().parse_args(["certify", "paper"])
    fl, ex = inspect.signature(certify).parameters, inspect.signature(exact_certify).parameters
    assert ex["excess"].default is args.excess is False
    assert fl["svm_certificate"].default == "float"
    for params in (fl, ex):
        assert params["solver"].default == args.solver
        assert params["separability_solver"].default == args.separability_solver
        assert params["use_lemma1"].default is (not args.no_lemma1)
