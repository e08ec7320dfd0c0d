"""The ``ntpcert`` command line: parse → call the library → render.

Exit codes: 0 done (whatever the verdict), 2 bad input or usage (one line on stderr), 1 internal
failure. Heavy modules (cvxpy, sympy, scipy.optimize, matplotlib) are imported inside the commands
that need them, so ``ntpcert --help`` stays instant.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any, Callable, Sequence

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Raised by the parser instead of printing usage and exiting."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message}")


# ---------------------------------------------------------------------------- helpers
def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", metavar="DATA", help="a .npz/.json file, a text corpus, or a built-in name (paper, dyck, pydoc)")
    g = p.add_argument_group("corpus options (text files and text built-ins)")
    g.add_argument("--tokenizer", choices=["char", "word"], default=None, help="tokenizer for text (default char)")
    g.add_argument("-k", "--context-length", type=int, default=None, metavar="K", help="context length k (default 2 for text, 4 for dyck)")
    g.add_argument("--all-prefixes", action="store_true", help="also use all shorter contexts, lengths 1..k-1")
    g.add_argument("--embedding", default=None, metavar="SPEC",
                   help="onehot-context | onehot-concat | random:D | path.npy (default onehot-concat)")
    g.add_argument("--max-chars", type=int, default=None, metavar="N", help="read at most N characters of text")
    p.add_argument("--seed", type=int, default=0, help="seed of generated data and random embeddings (default 0)")


def _load(args: argparse.Namespace):
    from ntpcert.instance.load import load_instance

    return load_instance(
        args.data,
        tokenizer=args.tokenizer,
        context_length=args.context_length,
        all_prefixes=args.all_prefixes,
        embedding=args.embedding,
        seed=args.seed,
        max_chars=args.max_chars,
        progress=_progress(args),
    )


def _solver_options(p: argparse.ArgumentParser) -> None:
    """``--solver`` and ``--progress``, shared by the commands that solve the NTP-SVM."""
    p.add_argument("--solver", default="structured", help="NTP-SVM solver: structured (default), structured-float, clarabel, cvxpy, cvxpy:NAME, osqp, scs, piqp, proxqp, highs")
    p.add_argument("--progress", action="store_true", help="show progress on stderr even when not a terminal")


def _progress(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "progress", False)) or (sys.stderr.isatty() and not getattr(args, "json", False))


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _fmt(v: Any) -> str:
    if v is None:
        return "undetermined"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _check_out_path(path: str, field: str) -> str:
    parent = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(parent):
        from ntpcert.errors import InputError

        raise InputError(f"{field}: directory {parent!r} does not exist")
    return path


def save_npy_atomic(path: str, array) -> None:
    """Write ``array`` as ``.npy`` to ``path`` atomically (temporary file, then ``os.replace``)."""
    import io

    import numpy as np

    from ntpcert.instance.io.arrays import atomic_write_bytes

    buf = io.BytesIO()
    np.save(buf, np.asarray(array))
    atomic_write_bytes(path, buf.getvalue())


# ---------------------------------------------------------------------------- commands
def cmd_info(args: argparse.Namespace) -> int:
    inst = _load(args)
    info = inst.describe()
    info["fingerprint"] = inst.fingerprint()
    if args.json:
        _emit_json(info)
    else:
        for key, val in info.items():
            print(f"{key:>20}: {_fmt(val)}")
    return EXIT_OK


def _print_report(rep) -> None:
    j = rep.to_json()
    print(f"instance {j['name']}: m={j['m']} contexts, d={j['d']}, V={j['V']}, n={_fmt(j['n'])}, "
          f"k_j in [{j['support_size_min']}, {j['support_size_max']}]")
    print(f"  entropy lower bound H      = {j['entropy']:.10g} nats")
    c, s = j["compatible"], j["separable"]
    print(f"  NTP-compatible (4)         : {_fmt(c['holds'])}  (residual {c['residual']:.3e}, relative "
          f"{c['relative_residual']:.3e}; holds below {c['tolerance']:g}, fails above {c['incompatible_above']:g}; dim F = {c['dim_F']})")
    mm = "" if s["min_margin"] is None else f", min margin {s['min_margin']:.6g}"
    print(f"  NTP-separable (6)          : {_fmt(s['holds'])}  (HiGHS: {s['status']}{mm})")
    print(f"  entropy bound reachable    : {_fmt(j['entropy_bound_reachable'])}")
    if j["svm"]:
        v = j["svm"]
        print(f"  NTP-SVM ||W^mm||_F         = {v['norm']:.10g}  ({v['solver']}, {v['status']}; primal res "
              f"{v['primal_residual']:.2e}, dual res {v['dual_residual']:.2e}, gap {v['gap']:.2e})")
    elif j.get("svm_error"):
        print(f"  NTP-SVM                    : {j['svm_error']}")
    print("  (float verdicts; run with --exact for certificates checked in rational arithmetic)")


def cmd_certify(args: argparse.Namespace) -> int:
    if args.exact:
        from ntpcert.pipeline.exact_verdicts import run_exact_certify  # noqa: PLC0415

        return run_exact_certify(args, _load(args))
    from ntpcert.pipeline.float_verdicts import certify

    inst = _load(args)
    rep = certify(inst, svm=not args.no_svm, solver=args.solver, progress=_progress(args))
    if args.json:
        _emit_json(rep.to_json())
    else:
        _print_report(rep)
    return EXIT_OK


def cmd_svm(args: argparse.Namespace) -> int:
    from ntpcert.errors import InfeasibleError
    from ntpcert.solve.svm import solve_svm

    if args.out:
        _check_out_path(args.out, "--out")
    inst = _load(args)
    options = {"progress_bar": _progress(args)} if args.solver.startswith("structured") else {}
    try:
        sol = solve_svm(inst, solver=args.solver, **options)
    except InfeasibleError as err:
        out = {"m": inst.m, "d": inst.d, "V": inst.V, "separable": False, "message": str(err)}
        cert = getattr(err, "certificate", None)
        if cert is not None and hasattr(cert, "to_json"):
            out["certificate"] = cert.to_json()
        if args.json:
            _emit_json(out)
        else:
            print(f"not separable: {err}")
        return EXIT_OK
    if args.out:
        save_npy_atomic(args.out, sol.W)
    if args.json:
        out = {"m": inst.m, "d": inst.d, "V": inst.V, "separable": True, **sol.to_json(), "out": args.out}
        _emit_json(out)
    else:
        j = sol.to_json()
        print(f"NTP-SVM on {inst.name} (m={inst.m}, d={inst.d}, V={inst.V}) with {j['solver']}: {j['status']}")
        for key in ("norm", "objective", "dual_objective", "primal_residual", "dual_residual", "gap", "min_margin", "seconds"):
            print(f"  {key:>16}: {j[key]:.10g}")
        if args.out:
            print(f"  W^mm written to {args.out} (shape {sol.W.shape})")
    return EXIT_OK


#: The basis of F is written only when it has at most this many entries (dim F · V · d).
MAX_BASIS_ENTRIES = 50_000_000


def cmd_limits(args: argparse.Namespace) -> int:
    from ntpcert.pipeline.float_verdicts import certify

    out = args.out
    if os.path.exists(out) and not os.path.isdir(out):
        from ntpcert.errors import InputError

        raise InputError(f"--out: {out!r} exists and is not a directory")
    inst = _load(args)
    rep = certify(inst, svm=True, solver=args.solver, progress=_progress(args))
    summary = rep.to_json()
    files: dict[str, Any] = {}
    arrays: dict[str, Any] = {"W_star.npy": rep.compatible.W_star}
    if rep.svm is not None:
        arrays["W_mm.npy"] = rep.svm.W
    dimF = rep.subspace.dim
    if dimF * inst.V * inst.d <= MAX_BASIS_ENTRIES:
        arrays["F_basis.npy"] = rep.subspace.basis()
    else:
        summary["F_basis_skipped"] = f"dim F * V * d = {dimF * inst.V * inst.d} > {MAX_BASIS_ENTRIES}"
    parent = os.path.dirname(os.path.abspath(out)) or "."
    if not os.path.isdir(parent):
        from ntpcert.errors import InputError

        raise InputError(f"--out: directory {parent!r} does not exist")
    # write everything into a fresh directory next to OUT, then move files in: nothing half-written
    stage = tempfile.mkdtemp(prefix=".ntpcert-", dir=parent)
    try:
        import numpy as np

        for name, arr in arrays.items():
            np.save(os.path.join(stage, name), arr)
            files[name] = list(np.shape(arr))
        summary["files"] = files
        summary["W_star_shape_note"] = "W has shape (V, d); F_basis has shape (dim F, V, d)"
        with open(os.path.join(stage, "summary.json"), "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2, default=_json_default)
        os.makedirs(out, exist_ok=True)
        for name in os.listdir(stage):
            os.replace(os.path.join(stage, name), os.path.join(out, name))
    finally:
        import shutil

        shutil.rmtree(stage, ignore_errors=True)
    if args.json:
        _emit_json(summary)
    else:
        _print_report(rep)
        print(f"wrote {', '.join(sorted(files))} and summary.json to {out}")
    return EXIT_OK


# ---------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ntpcert", description="Certify whether an NTP dataset lets a linear decoder reach the "
                "entropy lower bound, and compute the limits gradient descent picks (W*, F, W^mm).")
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    s = sub.add_parser("info", help="sizes, supports and entropy of a dataset")
    _data_options(s)
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser("certify", help="decide compatibility, separability and reachability of the entropy bound")
    _data_options(s)
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--exact", action="store_true", help="certificates checked in exact rational arithmetic")
    s.add_argument("--certificate-out", metavar="PATH", default=None, help="with --exact: write the certificate here")
    s.add_argument("--no-svm", action="store_true", help="skip the NTP-SVM")
    _solver_options(s)
    s.set_defaults(func=cmd_certify)

    s = sub.add_parser("svm", help="solve the NTP-SVM for W^mm")
    _data_options(s)
    s.add_argument("--out", metavar="W.npy", default=None, help="write W^mm (shape (V, d)) here")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    _solver_options(s)
    s.set_defaults(func=cmd_svm)

    s = sub.add_parser("limits", help="write W*, W^mm and a basis of F as .npy plus summary.json")
    _data_options(s)
    s.add_argument("--out", metavar="DIR", required=True, help="output directory (created if missing)")
    s.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    _solver_options(s)
    s.set_defaults(func=cmd_limits)

    for register in EXTRA_COMMANDS:
        register(sub)
    return p


def _register_lazy(module: str, name: str) -> Callable[[Any], None]:
    def register(sub: Any) -> None:
        import importlib
        import importlib.util

        if importlib.util.find_spec(module) is None:
            return
        importlib.import_module(module).register(sub, name)

    return register


#: Further commands, one module each under ``ntpcert/commands/``: each has ``register(subparsers, name)``
#: that adds its sub-parser with ``set_defaults(func=...)`` and imports heavy code only inside ``func``.
EXTRA_COMMANDS: list[Callable[[Any], None]] = [
    _register_lazy("ntpcert.cli.verify", "verify"),
    _register_lazy("ntpcert.cli.bench", "bench"),
    _register_lazy("ntpcert.cli.trajectory", "trajectory"),
    _register_lazy("ntpcert.cli.reproduce", "reproduce"),
    _register_lazy("ntpcert.cli.sweep", "sweep"),
    _register_lazy("ntpcert.cli.sweep_plot", "sweep-plot"),
]


def _version() -> str:
    from ntpcert import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    from ntpcert.errors import InputError, NTPCertError

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        return int(args.func(args) or 0)
    except UsageError as err:
        print(str(err), file=sys.stderr)
        return EXIT_USAGE
    except InputError as err:
        print(f"ntpcert: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except NTPCertError as err:
        if debug:
            raise
        print(f"ntpcert: failed: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("ntpcert: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except SystemExit as err:  # --help / --version
        return int(err.code or 0) if isinstance(err.code, int) else EXIT_OK
    except Exception as err:  # noqa: BLE001
        if debug:
            raise
        print(f"ntpcert: internal error: {type(err).__name__}: {err} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
