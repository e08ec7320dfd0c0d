r"""The excess-loss bracket, certified: ``certify --exact`` and ``explain --exact``.

From the float bracket (:func:`ntpcert.solve.excess.float_bracket`: a decoder W and a dual point q
feasible up to ~1e-12), :func:`exact_excess` makes

* q exactly feasible (:func:`ntpcert.exact.excess.repair`; when that fails, q = p, which is always
  feasible and gives the entropy bound as the lower end);
* W a rational matrix (the float W rounded to the grid :math:`2^{-W\_BITS}`; with the split, W is
  :math:`W_N + sD_P`, so its CE, evaluated here in ``arb``, lies within the tail
  :math:`e^{-s\mu_{min}}T_0` of :math:`\mathrm{CE}_N(W_N)`, :mod:`ntpcert.solve.excess`: the upper end
  is certified as CE at that decoder and does not rest on the split being right);
* the four numbers ``lower``, ``upper``, ``excess_lower``, ``excess_upper`` from ``arb`` balls
  (:mod:`ntpcert.exact.excess`), rounded outward to floats;

and the certificate section ``excess`` that :mod:`ntpcert.certificate.checker.excess` re-checks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ntpcert.certificate.encode import matrix_strings, sparse_list
from ntpcert.errors import InputError
from ntpcert.exact import excess as xe
from ntpcert.exact.dyadic import fraction_down, fraction_up
from ntpcert.instance import NTPInstance
from ntpcert.solve.excess import EXCESS_TOL, ExcessBracket, float_bracket
from ntpcert.util.numbers import single_thread

#: The rational decoder is the float W rounded to multiples of 2^-W_BITS.
W_BITS = 52
#: ``certify`` adds the bracket automatically only up to this many (context, token) cells (m * V);
#: beyond, the key says it was skipped (``ntpcert explain`` and :func:`exact_excess` have no cap).
AUTO_MAX_CELLS = 250_000
#: ``explain`` brackets instances up to this many cells (dense (m, V) arrays; the solver has its budget of
#: :data:`~ntpcert.solve.excess.MAX_NEWTON` Newton steps and returns the best bracket so far). The float
#: solver inside ``certify`` and ``explain`` has no time limit (it had 120 s): its budget is that count.
EXPLAIN_MAX_CELLS = 2_000_000
#: Relative width asked of the float solver inside ``certify`` and ``explain``, and the absolute width
#: (nats) that also ends it (where L* = H, e.g. on ``paper``, only the absolute width can shrink).
PIPELINE_TOL = 1e-7
PIPELINE_ABS_TOL = 1e-10


@dataclass(frozen=True, eq=False)
class ExactExcess:
    """A certified bracket.

    Attributes
    ----------
    float_bracket : ExcessBracket
    lower, upper, excess_lower, excess_upper : float
        Certified (rounded outward) bounds on :math:`L^*` and :math:`L^* - \\mathcal H`.
    section : dict
        The certificate section ``excess``.
    repair : str
        ``"exact"`` when the float q was made exactly feasible, else why q = p was used.
    seconds : float
    """

    float_bracket: ExcessBracket
    lower: float
    upper: float
    excess_lower: float
    excess_upper: float
    section: dict
    repair: str
    seconds: float

    @property
    def relative_width(self) -> float:
        w = self.excess_upper - max(self.excess_lower, 0.0)
        return w / self.excess_upper if self.excess_upper > 0 else (0.0 if w <= 0 else float("inf"))

    def to_json(self, *, per_context: bool = True) -> dict[str, Any]:
        out = self.float_bracket.to_json(per_context=per_context)
        out["float"] = {k: out[k] for k in ("lower", "upper", "excess_lower", "excess_upper", "relative_width")}
        out.update(lower=self.lower, upper=self.upper, excess_lower=max(self.excess_lower, 0.0),
                   excess_upper=self.excess_upper, relative_width=self.relative_width, exact=True,
                   exact_repair=self.repair, q_nonzeros=len(self.section["q"]), exact_seconds=self.seconds)
        return out


def exact_excess(instance: NTPInstance, bracket: ExcessBracket | None = None, *, tol: float = EXCESS_TOL,
                 time_limit: float | None = None, split: Any = None) -> ExactExcess:
    """Certify the bracket (module doc); ``bracket`` is computed when not given (with ``split``, as
    :func:`~ntpcert.solve.excess.float_bracket`). Raises :class:`~ntpcert.errors.InputError` when a row
    of the exact probabilities does not sum to 1."""
    bad = xe.ExactData.of(instance).row_off_simplex()
    if bad is not None:
        raise InputError(f"probs: the exact probabilities of context {bad} do not sum to 1 (read from floats); "
                         "the excess bracket is not certified")
    b = bracket if bracket is not None else float_bracket(instance, tol=tol, time_limit=time_limit, split=split)
    t0 = time.perf_counter()
    data = xe.ExactData.of(instance)
    m, V = instance.m, instance.V
    with single_thread():  # small QRs only: threads cost more than they give (4-5x CPU under load)
        rep = xe.repair(instance, b.q, data) if not b.method.endswith("+ p") else xe.Repair(None, "the float q is p")
    if rep.q is not None:
        q, how = rep.q, "exact"
    else:
        q = {(j, v): Fraction(c, data.varpi[j]) for (j, v), c in data.P.items()}
        how = f"q = p ({rep.reason})"
    Wg = np.ldexp(np.round(np.ldexp(np.asarray(b.W, dtype=np.float64), W_BITS)), -W_BITS)
    Wf = [[Fraction(float(x)) for x in row] for row in Wg]
    num, den = xe.rational_decoder(Wf)
    balls = xe.bracket_balls(data, q, num, den, m, V)
    lower = fraction_down(xe.lower_end(balls.entropy_q))
    upper = fraction_up(xe.upper_end(balls.ce))
    ex_lo = fraction_down(xe.lower_end(balls.excess_q))
    ex_up = fraction_up(xe.upper_end(balls.excess_ce))
    section = {"q": sparse_list(q), "W": matrix_strings(Wf), "lower": lower, "upper": upper,
               "excess_lower": max(ex_lo, 0.0), "excess_upper": ex_up}
    return ExactExcess(b, lower, upper, ex_lo, ex_up, section, how, time.perf_counter() - t0)


def skipped_bracket_text(cells: int, cap: int) -> str:
    """Why the bracket on L* - H was skipped and the next step that can compute it: ``explain``
    only when its larger cap admits the instance (never the command that just skipped it), else the
    library call, which has no cap."""
    why = f"m * V = {cells:,} cells exceed the {cap:,} bracketed here"
    if cells <= EXPLAIN_MAX_CELLS and cap < EXPLAIN_MAX_CELLS:
        return why + f"; run 'ntpcert explain DATA' (it brackets up to {EXPLAIN_MAX_CELLS:,} cells)"
    return (why + f", and no command brackets more than {EXPLAIN_MAX_CELLS:,}; from Python, "
            "ntpcert.solve.excess.float_bracket(instance) has no cap (its time grows with m * V)")


def bracket_split(instance: NTPInstance, separable: bool | None) -> Any:
    """The split the bracket uses (:func:`ntpcert.solve.excess.float_bracket`): None on separable data
    (``separable`` True: N is empty and the bracket is as before), else the float split LP
    (:func:`ntpcert.solve.split.nonseparable_split`, at most
    :data:`~ntpcert.pipeline.nonseparable.SPLIT_LP_MAX_NONZEROS` non-zeros; an undetermined split leaves
    the bracket on its face tolerance, and its key ``face`` says why)."""
    if separable is True:
        return None
    from ntpcert.pipeline.nonseparable import SPLIT_LP_MAX_NONZEROS
    from ntpcert.solve.split import nonseparable_split

    return nonseparable_split(instance, max_nonzeros=SPLIT_LP_MAX_NONZEROS)


def excess_key(instance: NTPInstance, *, exact: bool, bracket: ExcessBracket | None = None,
               cap: int | None = AUTO_MAX_CELLS, check: bool = True, split: Any = None,
               separable: bool | None = None) -> tuple[dict, Any]:
    """The ``excess_loss`` key of ``certify --json`` / ``explain --json`` and the object behind it
    (an :class:`ExactExcess`, an :class:`ExcessBracket`, or None when skipped). With ``exact`` and
    ``check``, the section is also re-checked by the independent checker
    (:mod:`ntpcert.certificate.checker.excess`): keys ``checked`` and ``checks``.

    ``split`` (a float or exact split) defines the face of the bracket; when it is None it is
    :func:`bracket_split` (``separable`` True: none). The key ``face`` says which face was used."""
    if cap is not None and instance.m * instance.V > cap:
        return {"skipped": skipped_bracket_text(instance.m * instance.V, cap)}, None
    if bracket is None and split is None:
        split = bracket_split(instance, separable)
    b = bracket if bracket is not None else float_bracket(instance, tol=PIPELINE_TOL, abs_tol=PIPELINE_ABS_TOL,
                                                          split=split)
    if not exact:
        return b.to_json(), b
    bad = xe.ExactData.of(instance).row_off_simplex()
    if bad is not None:
        return dict(b.to_json(), exact_skipped=f"the exact probabilities of context {bad} do not sum to 1 "
                    "(read from floats): the bracket is not certified"), b
    ee = exact_excess(instance, b)
    out = ee.to_json()
    if check:
        from ntpcert.certificate.checker.excess import check_excess

        checks: list[str] = []
        why = check_excess(ee.section, instance, checks)
        out.update(checked=not why, check_reason=why, checks=checks)
    return out, ee


__all__ = ["AUTO_MAX_CELLS", "EXPLAIN_MAX_CELLS", "ExactExcess", "bracket_split", "exact_excess", "excess_key",
           "skipped_bracket_text"]
