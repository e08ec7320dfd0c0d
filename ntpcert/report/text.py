"""Plain-text renderings of the pipelines' reports, as lists of lines (the caller prints them)."""

from __future__ import annotations

import re
import textwrap
from typing import Any, Iterable

#: Width at which text reports are wrapped; a continuation is indented 4 more than its line.
WIDTH = 120


def wrap_lines(lines: Iterable[str], width: int = WIDTH) -> list[str]:
    """``lines`` with each line longer than ``width`` wrapped at spaces (a word longer than the width,
    such as a long number, is split), continuations indented 4 past the line's own indent. A space
    inside a double-quoted name (``" it"``) is never a break.

    >>> wrap_lines(["  " + "word " * 30], width=40)[1]
    '      word word word word word word word'
    """
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip(" ")) + 4)
        held = _QUOTED.sub(lambda mo: mo.group(0).replace(" ", _HOLD), line)
        out += [part.replace(_HOLD, " ") for part in textwrap.wrap(
            held, width=width, subsequent_indent=lead, break_on_hyphens=False, replace_whitespace=False,
            drop_whitespace=True)] or [line[:width]]
    return out


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_HOLD = "\x00"


def fmt(v: Any) -> str:
    """A verdict or value for people: ``undetermined`` for None, ``yes``/``no`` for booleans."""
    if v is None:
        return "undetermined"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def float_report_lines(rep: Any) -> list[str]:
    """The report of ``ntpcert certify`` (a :class:`~ntpcert.pipeline.float_verdicts.Report`)."""
    j = rep.to_json()
    lines = [
        f"instance {j['name']}: m={j['m']} contexts, d={j['d']}, V={j['V']}, n={fmt(j['n'])}, "
        f"k_j in [{j['support_size_min']}, {j['support_size_max']}]",
        f"  entropy lower bound H      = {j['entropy']:.10g} nats",
    ]
    c, s = j["compatible"], j["separable"]
    dim = "unknown" if c["dim_F"] is None else c["dim_F"]
    resid = "none" if c["relative_residual"] is None else f"{c['relative_residual']:.3e} relative"
    if c.get("relative_residual_lower_bound") is not None:  # a violating null vector's bound on every W
        resid += f", at least {c['relative_residual_lower_bound']:.3e} relative for every W by the witness"
    lines.append(f"  NTP-compatible (4)         : {fmt(c['holds'])}  [{c['engine'] or 'undetermined'}] ({c['reason']}; "
                 f"least-squares residual {resid}; dim F = {dim})")
    lines.append(f"  NTP-separable (6)          : {fmt(s['holds'])}  [{s['engine'] or 'undetermined'}] ({s['reason']})")
    lines.append(f"  entropy bound reachable    : {fmt(j['entropy_bound_reachable'])}")
    if j["svm"]:
        v = j["svm"]
        lines.append(f"  NTP-SVM ||W^mm||_F         = {v['norm']:.10g}  ({v['solver']}, {v['status']}; primal res "
                     f"{v['primal_residual']:.2e}, dual res {v['dual_residual']:.2e}, gap {v['gap']:.2e})")
    elif j.get("svm_error"):
        lines.append(f"  NTP-SVM                    : {j['svm_error']}")
    if c["holds"] is not True and c["W_star_norm"] is not None:
        lines.append("  note: W* of the JSON/limits output is only a least-squares point of (4) here")
    elif c["holds"] is not True:
        lines.append("  note: no least-squares point of (4) was fitted (W* does not exist or is moot); "
                     "'ntpcert limits' writes one")
    lines.append("  (float verdicts, each with the witness that decided it; run with --exact for certificates "
                 "checked in rational arithmetic)")
    return wrap_lines(lines)


def exact_report_lines(r: Any) -> list[str]:
    """The report of ``ntpcert certify --exact`` (an
    :class:`~ntpcert.pipeline.exact_verdicts.ExactReport`)."""
    inst = r.float_report.instance
    c = r.compatibility
    out: list[str] = []
    w = out.append
    w(f"instance {inst.name}: m={inst.m} contexts, d={inst.d}, V={inst.V}, n={inst.n if inst.n is not None else '-'}")
    w(f"  entropy lower bound H      = {inst.entropy() + 0.0:.10g} nats")
    if inst.probs_exact_from_floats:
        w("  note: probabilities were given as floats; they are taken as the exact (dyadic) rationals they are")
    comp = r.compatible
    w(f"  NTP-compatible (4)         : {fmt(comp.holds)}  ({_exact_compat_text(r) if comp.holds is not None else comp.reason})")
    if r.w_star is not None and not r.w_star.terms:
        w("  W* = 0  (every in-support ratio is 1)")
    elif r.w_star is not None:
        w(f"  W* = {' + '.join(f'log({p})*R_{p}' for p in r.w_star.terms)}  (exact rational R_p), "
          f"||W*||_F = {r.w_star.norm(20)}")
    elif c.holds:
        w(f"  W* closed form             : {r.w_star_note}")
    sep = r.separable
    w(f"  NTP-separable (6)          : {fmt(sep.holds)}  ({_exact_sep_text(sep) if sep.holds is not None else sep.reason})")
    w(f"  entropy bound reachable    : {fmt(r.entropy_bound_reachable)}")
    out += _why_not_lines(getattr(r, "why_not", None), r.check.valid)
    if r.svm is not None and r.svm_certified:
        b = r.svm
        w(f"  NTP-SVM ||W^mm||_F in [{b.norm_lower:.12g}, {b.norm_upper:.12g}]; exact gap {b.gap_float:.3e} "
          f"(relative {b.relative_gap:.1e}) => ||W - W^mm||_F <= {b.distance_bound:.3e}")
    elif r.svm is not None:
        w(f"  NTP-SVM                    : not certified ({r.svm.reason})")
    elif r.float_report.svm_error and r.separable.holds is not None:
        w(f"  NTP-SVM                    : {r.float_report.svm_error}")
    elif r.float_report.svm_error:
        w("  NTP-SVM                    : not solved (separability is undetermined)")
    if r.check.valid:
        w("  certificate                : checked independently, VALID"
          + (f"; written to {r.path}" if r.path else " (not written; use --certificate-out PATH)"))
    else:
        w(f"  certificate                : INVALID ({r.check.reason}); all verdicts reported as undetermined; "
          "not written")
    return wrap_lines(out)


def vocabulary_lines(merge: Any, *, svm_asked: bool) -> list[str]:
    """What a model's instance did with its vocabulary (a :class:`~ntpcert.instance.lm.merge.TokenMerge`,
    or None: no lines)."""
    if merge is None:
        return []
    if not merge.merged:
        return wrap_lines([f"vocabulary: all {merge.V:,} tokens of the model follow some context; nothing merged"])
    lines = [f"vocabulary: the model has V = {merge.V:,} tokens; the instance keeps the {merge.observed.size:,} that "
             f"follow some context and one representative (token {merge.representative}) of the {merge.merged:,} "
             "others, which leaves compatibility and separability exactly as for the full vocabulary"]
    if svm_asked:
        lines.append("NTP-SVM: " + merge.report_keys(svm_asked=True)["svm_error"])
    return wrap_lines(lines)


def _short_number(v: Any) -> str:
    """An exact coefficient for a report line: in full up to about 40 digits, else by its size (a
    Gaussian corpus's null vectors have coefficients of thousands of digits, past the interpreter's
    int-string limit; the certificate holds them in full)."""
    num, den = getattr(v, "numerator", v), getattr(v, "denominator", 1)
    bits = max(abs(int(num)).bit_length(), int(den).bit_length())
    if bits <= 128:
        return str(v)
    return f"{'-' if num < 0 else ''}<a rational of about {int(bits * 0.30103) + 1} digits>"


def _exact_compat_text(r: Any) -> str:
    """The exact witness of (4) in words (:mod:`ntpcert.verdict`)."""
    from ntpcert.verdict import EmbeddingsFullRank, ParticularSolutions, ViolatingNullVector

    w = r.compatible.witness
    if isinstance(w, EmbeddingsFullRank):
        return f"exact: {w.rank_witness.describe()}; Lemma 1"
    if isinstance(w, ParticularSolutions):
        return f"exact: {w.describe()}; dim F = {w.rank}, exact rank"
    if isinstance(w, ViolatingNullVector):
        from ntpcert.pipeline.exact_verdicts import violation_exponents

        yE = violation_exponents(r.float_report.subspace.system, w.y, r.primes, r.E)
        viol = " + ".join(f"{_short_number(v)}*log({p})" for p, v in yE.items())
        return f"exact: null vector y with y^T b = {viol} != 0"
    rank = getattr(w, "rank", None)
    modulus = getattr(w, "modulus", None)
    how = f"rank mod {modulus}" if modulus is not None else "exact rank"
    null_dim = None if rank is None else r.float_report.subspace.system.n_eq - rank
    return f"exact: null(A_eq^T) has dimension {null_dim}, Y^T E = 0 over {len(r.primes)} primes; dim F = {rank}, {how}"


def _exact_sep_text(v: Any) -> str:
    """The exact witness of (6) in words."""
    from ntpcert.verdict import EmbeddingsFullRank, FarkasRay

    w = v.witness
    if isinstance(w, EmbeddingsFullRank):
        return f"exact: {w.rank_witness.describe()}; Lemma 1"
    if isinstance(w, FarkasRay):
        return f"exact Farkas ray with {len(w.ray)} nonzeros"
    return "exact feasible point, margins >= 1"


def _why_not_lines(keys: dict | None, valid: bool) -> list[str]:
    """One line per explained negative verdict (``certify --exact``): the irreducible culprit, and
    whether the certificate carries it."""
    out = []
    where = {True: "in the certificate" if valid else "in the certificate, which is INVALID",
             False: "not in the certificate"}
    sep = (keys or {}).get("why_not_separable")
    if sep is not None and "skipped" not in sep:
        texts = ", ".join(f"'{c['text']}'" for c in sep["contexts"][:6]) + (", ..." if sep["size"] > 6 else "")
        state = "irreducible" if sep["irreducible"] else "not proved irreducible"
        out.append(f"  why not separable          : {sep['size']} contexts, {state} ({texts}); "
                   f"{where[sep.get('in_certificate', False)]}")
    elif sep is not None:
        out.append(f"  why not separable          : {sep['skipped']}")
    comp = (keys or {}).get("why_not_compatible")
    if comp is not None and "skipped" not in comp:
        state = "an irreducible cycle" if comp["irreducible"] else "a cycle not proved irreducible"
        exact = f" = {comp['mismatch_exact']}" if comp.get("mismatch_exact") else ""
        out.append(f"  why not compatible         : {state} of {comp['equations']} log-odds equations, mismatch "
                   f"{comp['mismatch_nats']:.6g} nats{exact}; {where[comp.get('in_certificate', False)]}")
    elif comp is not None:
        out.append(f"  why not compatible         : {comp['skipped']}")
    if out:
        out.append("  (ntpcert explain DATA prints the contexts, their supports and the equations)")
    return out


__all__ = ["WIDTH", "exact_report_lines", "float_report_lines", "fmt", "wrap_lines"]
