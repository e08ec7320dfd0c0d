"""Every bad input, on every command: exit 2, one line on stderr, no traceback, and no file created
or changed, because each one is refused before the command's work starts.

One table. Each row runs ``ntpcert.cli.app.main(argv)`` in-process in a fresh copy of a small
directory of inputs (tiny instances, texts, sweep specs, a sweep store, existing outputs) and
compares a snapshot of that directory (every path, with the mtime and content of every file)
before and after.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from ntpcert import NTPInstance
from ntpcert.cli.app import main
from ntpcert.instance.io import write_json

#: (id, argv, a word the one line must contain). Paths are relative to the test's directory, which
#: holds the files written by ``_template`` below.
CASES = [
    # ---------------------------------------------------------------- info (DATA and the corpus options)
    ("info-csv-table", ["info", "table.csv"], "--tokenizer"),
    ("info-tsv-table", ["info", "table.tsv"], "looks like a table"),
    ("info-whitespace-text", ["info", "blank.txt"], "whitespace"),
    ("info-empty-text", ["info", "empty.txt"], "empty"),
    ("info-text-shorter-than-k", ["info", "short.txt", "-k", "5"], "k (context length)"),
    ("info-k-50-counts-limit", ["info", "pydoc", "-k", "50"], "--max-entries"),
    ("info-random-dim-1e9", ["info", "dyck", "--embedding", "random:1000000000"], "embedding"),
    ("info-dyck-k-1e9", ["info", "dyck", "-k", "1000000000"], "k (context length)"),
    ("info-max-entries-small", ["info", "text.txt", "--max-entries", "100"], "contexts"),
    ("info-max-entries-tiny", ["info", "text.txt", "--max-entries", "10"], "embedding"),
    ("info-max-entries-zero", ["info", "text.txt", "--max-entries", "0"], "--max-entries"),
    ("info-max-chars-1", ["info", "text.txt", "--max-chars", "1"], "--max-chars"),
    ("info-negative-seed", ["info", "paper", "--seed", "-1"], "--seed"),
    ("info-k-zero", ["info", "text.txt", "-k", "0"], "-k"),
    ("info-unknown-builtin", ["info", "no-such-data"], "no-such-data"),
    ("info-option-not-for-builtin", ["info", "paper", "--tokenizer", "word"], "tokenizer"),
    # ---------------------------------------------------------------- certify
    ("certify-cert-over-input", ["certify", "D.json", "--exact", "--certificate-out", "D.json"], "input"),
    ("certify-cert-over-input-force", ["certify", "D.json", "--exact", "--certificate-out", "D.json", "--force"],
     "input"),
    ("certify-cert-exists", ["certify", "D.json", "--exact", "--certificate-out", "old.json"], "--force"),
    ("certify-cert-without-exact", ["certify", "D.json", "--certificate-out", "c.json"], "--exact"),
    ("certify-cert-missing-dir", ["certify", "D.json", "--exact", "--certificate-out", "nodir/c.json"],
     "does not exist"),
    ("certify-cert-unwritable-dir", ["certify", "D.json", "--exact", "--certificate-out", "ro/c.json"],
     "permission"),
    ("certify-cvxpy-nope", ["certify", "D.json", "--solver", "cvxpy:NOPE"], "cvxpy:NOPE"),
    ("certify-cvxpy-nope-no-svm", ["certify", "D.json", "--solver", "cvxpy:NOPE", "--no-svm"], "cvxpy:NOPE"),
    ("certify-unknown-solver", ["certify", "D.json", "--solver", "nope"], "nope"),
    ("certify-csv", ["certify", "table.csv"], "table"),
    # ---------------------------------------------------------------- svm
    ("svm-out-over-input", ["svm", "D.json", "--out", "D.json"], "input"),
    ("svm-out-symlink-to-input", ["svm", "D.json", "--out", "link.npy"], "input"),
    ("svm-out-exists", ["svm", "D.json", "--out", "W.npy"], "--force"),
    ("svm-out-is-directory", ["svm", "D.json", "--out", "outdir"], "directory"),
    ("svm-out-unwritable-dir", ["svm", "D.json", "--out", "ro/W.npy"], "permission"),
    ("svm-cvxpy-nope", ["svm", "D.json", "--solver", "cvxpy:NOPE", "--out", "W2.npy"], "cvxpy:NOPE"),
    # ---------------------------------------------------------------- limits
    ("limits-dir-holds-outputs", ["limits", "D.json", "--out", "outdir"], "--force"),
    ("limits-out-is-file", ["limits", "D.json", "--out", "D.json"], "not a directory"),
    ("limits-out-unwritable-parent", ["limits", "D.json", "--out", "ro/new"], "permission"),
    ("limits-out-unwritable-dir", ["limits", "D.json", "--out", "ro"], "permission"),
    ("limits-out-missing-parent", ["limits", "D.json", "--out", "nodir/new"], "does not exist"),
    ("limits-cvxpy-nope", ["limits", "D.json", "--out", "new", "--solver", "cvxpy:NOPE"], "cvxpy:NOPE"),
    # ---------------------------------------------------------------- verify
    ("verify-missing-cert", ["verify", "missing.json"], "missing.json"),
    ("verify-data-csv", ["verify", "old.json", "--data", "table.csv"], "table"),
    ("verify-data-option-not-for-file", ["verify", "old.json", "--data", "D.json", "-k", "3"], "context_length"),
    # ---------------------------------------------------------------- bench
    ("bench-tol-nan", ["bench", "--tol", "nan"], "--tol"),
    ("bench-time-limit-inf", ["bench", "--time-limit", "inf"], "--time-limit"),
    ("bench-seeds-huge", ["bench", "--seeds", "1000000"], "--seeds"),
    ("bench-out-holds-report", ["bench", "--scale", "tiny", "--out", "benchdir"], "--force"),
    ("bench-out-is-file", ["bench", "--out", "D.json"], "not a directory"),
    ("bench-cvxpy-nope", ["bench", "--scale", "tiny", "--backends", "cvxpy:NOPE"], "cvxpy:NOPE"),
    # ---------------------------------------------------------------- trajectory
    ("trajectory-lr-1e300", ["trajectory", "D.json", "--lr", "1e300", "--out", "t"], "--lr"),
    ("trajectory-lr-nan", ["trajectory", "D.json", "--lr", "nan", "--out", "t"], "--lr"),
    ("trajectory-steps-1e15-int", ["trajectory", "D.json", "--steps", str(10**15), "--out", "t"], "--steps"),
    ("trajectory-steps-1e15-float", ["trajectory", "D.json", "--steps", "1e15", "--out", "t"], "--steps"),
    ("trajectory-points-per-decade-huge", ["trajectory", "D.json", "--points-per-decade", "100000000", "--out", "t"],
     "--points-per-decade"),
    ("trajectory-beta1-above-1", ["trajectory", "D.json", "--optimizer", "adam", "--beta1", "1.5", "--out", "t"],
     "--beta1"),
    ("trajectory-ns-steps-huge", ["trajectory", "D.json", "--optimizer", "muon", "--ns-steps", "1000000", "--out", "t"],
     "--ns-steps"),
    ("trajectory-snapshots-limit", ["trajectory", "D.json", "--snapshots", "--max-entries", "10", "--out", "t"],
     "--snapshots"),
    ("trajectory-dir-holds-outputs", ["trajectory", "D.json", "--out", "trajdir"], "--force"),
    ("trajectory-data-in-out-dir", ["trajectory", "trajdir/metrics.csv", "--out", "trajdir", "--force",
                                    "--tokenizer", "char"], "input"),
    ("trajectory-cvxpy-nope", ["trajectory", "D.json", "--out", "t", "--solver", "cvxpy:NOPE"], "cvxpy:NOPE"),
    # ---------------------------------------------------------------- reproduce
    ("reproduce-dir-holds-outputs", ["reproduce", "paper", "--out", "repdir"], "--force"),
    ("reproduce-out-is-file", ["reproduce", "paper", "--out", "D.json"], "not a directory"),
    ("reproduce-out-unwritable-parent", ["reproduce", "paper", "--out", "ro/rep"], "permission"),
    ("reproduce-steps-huge", ["reproduce", "paper", "--out", "r", "--steps", "10000000000"], "--steps"),
    ("reproduce-gd-lr-1e300", ["reproduce", "paper", "--out", "r", "--gd-lr", "1e300"], "--gd-lr"),
    ("reproduce-scale-inf", ["reproduce", "paper", "--out", "r", "--embedding-scale", "inf"], "--embedding-scale"),
    ("reproduce-unknown-experiment", ["reproduce", "cifar", "--out", "r"], "EXPERIMENT"),
    # ---------------------------------------------------------------- explain
    ("explain-csv", ["explain", "table.csv"], "table"),
    ("explain-missing", ["explain", "missing.json"], "missing.json"),
    ("explain-time-limit-negative", ["explain", "D.json", "--time-limit", "-1"], "--time-limit"),
    ("explain-time-limit-nan", ["explain", "D.json", "--time-limit", "nan"], "--time-limit"),
    ("explain-option-not-for-builtin", ["explain", "paper", "--tokenizer", "word"], "tokenizer"),
    # ---------------------------------------------------------------- geometry
    ("geometry-csv", ["geometry", "table.csv"], "table"),
    ("geometry-dir-holds-outputs", ["geometry", "D.json", "--out", "outdir"], "--force"),
    ("geometry-out-is-file", ["geometry", "D.json", "--out", "D.json"], "not a directory"),
    ("geometry-steps-zero", ["geometry", "D.json", "--train", "--steps", "0", "--out", "g"], "--steps"),
    ("geometry-steps-1e15", ["geometry", "D.json", "--train", "--steps", "1e15", "--out", "g"], "--steps"),
    ("geometry-weight-decay-nan", ["geometry", "D.json", "--train", "--weight-decay", "nan", "--out", "g"],
     "--weight-decay"),
    ("geometry-gap-tol-nan", ["geometry", "D.json", "--gap-tol", "nan", "--out", "g"], "--gap-tol"),
    ("geometry-gap-tol-zero", ["geometry", "D.json", "--gap-tol", "0", "--out", "g"], "--gap-tol"),
    ("geometry-weight-decay-negative", ["geometry", "D.json", "--train", "--weight-decay", "-1", "--out", "g"],
     "--weight-decay"),
    # ---------------------------------------------------------------- sweep (never a store left behind)
    ("sweep-m-d-1e6", ["sweep", "big.toml"], "grid.d"),
    ("sweep-d-over-m-1e300", ["sweep", "ratio.toml"], "grid.d_over_m"),
    ("sweep-max-count-1e20", ["sweep", "maxcount.toml"], "instance.max_count"),
    ("sweep-seeds-1e12", ["sweep", "seeds.toml"], "grid.seeds"),
    ("sweep-range-1e12", ["sweep", "range.toml"], "grid.m"),
    ("sweep-steps-1e10", ["sweep", "steps.toml"], "trajectory.steps"),
    ("sweep-cvxpy-nope", ["sweep", "cvxpy.toml"], "svm.solver"),
    ("sweep-workers-0", ["sweep", "good.toml", "--workers", "0"], "--workers"),
    ("sweep-workers-huge", ["sweep", "good.toml", "--workers", "100000"], "--workers"),
    ("sweep-bad-scheduler", ["sweep", "good.toml", "--scheduler", "nonsense"], "--scheduler"),
    ("sweep-serial-and-workers", ["sweep", "good.toml", "--serial", "--workers", "2"], "--serial"),
    ("sweep-store-other-settings", ["sweep", "good.toml", "--store", "s.sqlite"], "--store"),
    ("sweep-store-not-a-store", ["sweep", "good.toml", "--store", "table.csv"], "--store"),
    ("sweep-store-empty-file", ["sweep", "good.toml", "--store", "empty.sqlite"], "--store"),
    ("sweep-csv-over-spec", ["sweep", "good.toml", "--serial", "--csv", "good.toml"], "input"),
    ("sweep-csv-over-store", ["sweep", "good.toml", "--serial", "--csv", "good.sqlite"], "input"),
    ("sweep-csv-exists", ["sweep", "good.toml", "--serial", "--csv", "table.csv"], "--force"),
    ("sweep-chunk-size-0", ["sweep", "good.toml", "--serial", "--chunk-size", "0"], "--chunk-size"),
    # ---------------------------------------------------------------- sweep-plot
    ("sweep-plot-bad-suffix", ["sweep-plot", "s.sqlite", "--out", "f.txt"], "--out"),
    ("sweep-plot-out-exists", ["sweep-plot", "s.sqlite", "--out", "fig.png"], "--force"),
    ("sweep-plot-out-symlink-to-store", ["sweep-plot", "s.sqlite", "--out", "store-link.png"], "input"),
    ("sweep-plot-missing-store", ["sweep-plot", "missing.sqlite", "--out", "f.png"], "STORE"),
    ("sweep-plot-store-not-sqlite", ["sweep-plot", "table.csv", "--out", "f.png"], "STORE"),
    ("sweep-plot-store-empty", ["sweep-plot", "empty.sqlite", "--out", "f.png"], "STORE"),
    ("sweep-plot-where-no-rows", ["sweep-plot", "s.sqlite", "--out", "f.png", "--where", "m=99"], "--where"),
    ("compare-no-decoder", ["compare", "D.json"], "--W"),
    ("compare-missing-decoder", ["compare", "D.json", "--W", "nope.npy"], "--W"),
    ("compare-decoder-not-an-array", ["compare", "D.json", "--W", "W.npy"], "W"),
    ("compare-decoder-wrong-shape", ["compare", "D.json", "--W", "W22.npy"], "shape (V, d) = (3, 2)"),
    ("compare-figure-over-a-file", ["compare", "D.json", "--W", "W32.npy", "--figure", "fig.png"], "--figure"),
    ("bottleneck-no-decoder", ["bottleneck"], "W"),
    ("bottleneck-decoder-not-an-array", ["bottleneck", "W.npy"], "W"),
    ("bottleneck-missing-decoder", ["bottleneck", "nope.npy"], "nope.npy"),
    ("bottleneck-bias-wrong-shape", ["bottleneck", "W22.npy", "--bias", "W32.npy"], "--bias"),
    ("bottleneck-missing-model", ["bottleneck", "--model", "nope"], "--model"),
    ("bottleneck-certificate-over-input", ["bottleneck", "W22.npy", "--certificate-out", "W22.npy"], "input"),
    ("bottleneck-certificate-exists", ["bottleneck", "W22.npy", "--certificate-out", "fig.png"], "--force"),
    ("bottleneck-check-not-json", ["bottleneck", "W22.npy", "--check", "W.npy"], "certificate"),
]

#: Data files the strict reader refuses (the certificate's reader: ntpcert.util.strict_json), each with the
#: word its one line must contain.
STRICT_FILES = {
    "dup.json": ('{"embeddings": [[1.0, 0.0], [0.0, 1.0]], "counts": [[3, 1, 0], [0, 2, 2]], '
                 '"counts": [[3, 0, 0], [0, 2, 2]]}', "duplicate key 'counts'"),
    "unknown.json": ('{"embeddings": [[1.0, 0.0], [0.0, 1.0]], "counts": [[3, 1, 0], [0, 2, 2]], "extra": 1}',
                     "unknown key 'extra'"),
    "nan.json": ('{"embeddings": [[1.0, NaN], [0.0, 1.0]], "counts": [[3, 1, 0], [0, 2, 2]]}', "embeddings[0][1]"),
    "infinity.json": ('{"embeddings": [[1.0, 0.0], [-Infinity, 1.0]], "counts": [[3, 1, 0], [0, 2, 2]]}',
                      "embeddings[1][0]"),
    "overflow.json": ('{"embeddings": [[1.0, 0.0], [0.0, 1e999]], "counts": [[3, 1, 0], [0, 2, 2]]}',
                      "embeddings[1][1]"),
    "bigint.json": ('{"embeddings": [[1.0, 0.0], [0.0, 1.0]], "counts": [[3, 1, 0], [0, 2, ' + "9" * 5000 + ']]}',
                    "counts[1][2]"),
}
#: Every command that reads DATA, with the arguments it needs besides DATA.
DATA_COMMANDS = {
    "info": ["info", "{}"], "certify": ["certify", "{}"], "certify-exact": ["certify", "{}", "--exact"],
    "explain": ["explain", "{}"], "svm": ["svm", "{}", "--out", "Wnew.npy"],
    "limits": ["limits", "{}", "--out", "new"], "trajectory": ["trajectory", "{}", "--out", "t"],
    "geometry": ["geometry", "{}", "--out", "g"], "verify-data": ["verify", "D.cert.json", "--data", "{}"],
    "compare": ["compare", "{}", "--W", "W32.npy"],
}
CASES += [(f"{cmd}-strict-{name.split('.')[0]}", [a.replace("{}", name) for a in argv], needle)
          for cmd, argv in DATA_COMMANDS.items() for name, (_, needle) in STRICT_FILES.items()]

COMMANDS = {"info", "certify", "svm", "limits", "verify", "bench", "trajectory", "reproduce", "sweep", "sweep-plot",
            "explain", "geometry", "compare", "bottleneck"}

SPECS = {
    "good.toml": 'name = "good"\n[grid]\nm = 2\nd = 1\nV = 2\nk = 1\n',
    "big.toml": 'name = "big"\n[grid]\nm = 1000000\nd = 1000000\nV = 2\nk = 1\n',
    "ratio.toml": 'name = "ratio"\n[grid]\nm = 10\nd_over_m = 1e300\nV = 2\nk = 1\n',
    "maxcount.toml": 'name = "mc"\n[grid]\nm = 2\nd = 1\nV = 2\nk = 1\n[instance]\nmax_count = 100000000000000000000\n',
    "seeds.toml": 'name = "seeds"\n[grid]\nm = 2\nd = 1\nV = 2\nk = 1\nseeds = 1000000000000\n',
    "range.toml": 'name = "range"\n[grid]\nm = { from = 1, to = 1000000000000 }\nd = 1\nV = 2\nk = 1\n',
    "steps.toml": 'name = "steps"\nquantities = ["trajectory"]\n[grid]\nm = 2\nd = 1\nV = 2\nk = 1\n'
                  '[trajectory]\nsteps = 10000000000\n',
    "cvxpy.toml": 'name = "cv"\n[grid]\nm = 2\nd = 1\nV = 2\nk = 1\n[svm]\nsolver = "cvxpy:NOPE"\n',
}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The inputs every row starts from, built once."""
    from ntpcert.experiments.sweep import parse_spec, run_sweep

    root = tmp_path_factory.mktemp("inputs")
    write_json(NTPInstance.from_counts(np.eye(2), [[3, 1, 0], [0, 2, 2]]), root / "D.json")
    from ntpcert import exact_certify

    exact_certify(NTPInstance.from_counts(np.eye(2), [[3, 1, 0], [0, 2, 2]], name="D"),
                  certificate_out=str(root / "D.cert.json"))
    for name, (text, _) in STRICT_FILES.items():
        (root / name).write_text(text)
    (root / "text.txt").write_text("the cat sat on the mat and the dog sat on the log\n")
    (root / "short.txt").write_text("abc")
    (root / "blank.txt").write_text("   \n\t\n")
    (root / "empty.txt").write_text("")
    (root / "table.csv").write_text("a,b,c\n1,2,3\n4,5,6\n")
    (root / "table.tsv").write_text("a\tb\n1\t2\n")
    (root / "old.json").write_text("{}\n")
    (root / "W.npy").write_bytes(b"not really an array")
    np.save(root / "W22.npy", np.zeros((2, 2)))
    np.save(root / "W32.npy", np.zeros((3, 2)))
    (root / "fig.png").write_bytes(b"\x89PNG old figure")
    (root / "empty.sqlite").write_bytes(b"")
    for name, text in SPECS.items():
        (root / name).write_text(text)
    run_sweep(parse_spec({"name": "other", "seed": 5, "grid": {"m": 2, "d": 1, "V": 2, "k": 1}}), str(root / "s.sqlite"))
    for d, names in {"outdir": ["summary.json"], "trajdir": ["metrics.csv"], "repdir": ["summary.md"],
                     "benchdir": ["report.md"]}.items():
        (root / d).mkdir()
        for n in names:
            (root / d / n).write_text("kept\n")
    (root / "ro").mkdir()
    os.symlink("D.json", root / "link.npy")
    os.symlink("s.sqlite", root / "store-link.png")
    return root


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root``: directories by name, files by mtime and SHA-256, links by target."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir",)
            else:
                st = p.stat()
                out[rel] = ("file", st.st_mtime_ns, st.st_size, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def _emulate_permissions(monkeypatch, root: Path) -> None:
    """Root may write anywhere, so ``ro/`` (mode 0555) would not be read-only for it: under ``root``,
    make ``os.access`` answer from the permission bits, as it does for other users."""
    real = os.access

    def access(path, mode, *args, **kwargs):
        p = os.path.abspath(os.fspath(path))
        if p == str(root) or p.startswith(str(root) + os.sep):
            try:
                bits = os.stat(p).st_mode
            except OSError:
                return False
            need = ((mode & os.W_OK) and not bits & stat.S_IWUSR) or ((mode & os.X_OK) and not bits & stat.S_IXUSR) \
                or ((mode & os.R_OK) and not bits & stat.S_IRUSR)
            return not need
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


def test_the_table_covers_every_command():
    assert {argv[0] for _, argv, _ in CASES} == COMMANDS
    assert len(CASES) >= 40
    from ntpcert.cli.app import COMMANDS as registered

    assert set(registered) == COMMANDS


@pytest.mark.parametrize(("argv", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line_and_touches_nothing(argv, needle, template, tmp_path, monkeypatch, capsys):
    root = tmp_path / "cwd"
    shutil.copytree(template, root, symlinks=True)
    os.chmod(root / "ro", 0o555)
    monkeypatch.chdir(root)
    if os.geteuid() == 0:
        _emulate_permissions(monkeypatch, root)
    before = _snapshot(root)
    try:
        code = main(list(argv))
        out, err = capsys.readouterr()
        after = _snapshot(root)
    finally:
        os.chmod(root / "ro", 0o755)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (argv, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert needle in lines[0], (needle, lines[0])
    assert out == ""
    assert after == before, {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
                             if before.get(k) != after.get(k)}


def test_a_diverging_trajectory_fails_in_one_line_and_writes_nothing(template, tmp_path, monkeypatch, capsys):
    """A step size under the up-front cap whose iterate still stops being finite: the SolverError of
    the trajectory loop is a failure (exit 1) in one line, raised before anything is written."""
    import ntpcert.dynamics.trajectory as T
    from ntpcert.errors import SolverError

    def diverge(self, n):
        raise SolverError(f"{self.optimizer.name}: the iterate (or its norm) is not finite at step 7 (lr = 1e+06); "
                          "use a smaller step size")

    root = tmp_path / "cwd"
    shutil.copytree(template, root, symlinks=True)
    monkeypatch.chdir(root)
    monkeypatch.setattr(T.Stepper, "advance", diverge)
    before = _snapshot(root)
    code = main(["trajectory", "D.json", "--lr", "1e6", "--steps", "10", "--no-plot", "--out", "t"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "not finite" in err and "Traceback" not in err
    assert _snapshot(root) == before
