r"""The separability verdict (6) as a VIPR certificate, for checkers outside this project.

VIPR (Verified Integer Programming Result; Cheung, Gleixner and Steffy 2017, file format 1.1 of
``github.com/ambros-gleixner/VIPR``) states a linear program, the relation to prove and its proof in
plain text; ``viprchk`` checks it in exact rational (GMP) arithmetic. Here the program is (6) itself, a
pure feasibility LP over :math:`x = \mathrm{vec}(W)` (variable ``w<v>_<i>`` is entry (v, i) at index
:math:`v d + i`, :mod:`ntpcert.rows.kesler`), objective ``min 0``:

* ``e<j>_<z>``: :math:`((e_z - e_{z_j}) \otimes h_j)^\top x = 0` for :math:`z \in S_j \setminus \{z_j\}` (6a);
* ``g<j>_<v>``: :math:`((e_{z_j} - e_v) \otimes h_j)^\top x \ge 1` for :math:`v \notin S_j` (6b),

with :math:`z_j = \min S_j` the anchor, in the order of :class:`~ntpcert.rows.kesler.KeslerSystem`
(equality rows first). Every coefficient is an embedding entry, a dyadic rational written exactly as
``p/q``.

**Separable** (``RTP range -inf 0``, one solution in ``SOL``, ``DER 0``): the optimum of ``min 0`` is at
most 0, i.e. the LP is feasible, shown by the exact point. A :class:`~ntpcert.verdict.FeasiblePoint`
gives it directly; for :class:`~ntpcert.verdict.EmbeddingsFullRank` (rank H = m, Lemma 1) the point is
built: with :math:`Z_{v j} = [v \in S_j]`, :math:`W = Z^\top (H H^\top)^{-1} H` has logits
:math:`W H^\top = Z^\top`, so every (6a) difference is 0 and every margin is exactly 1 (solved in
rationals, up to :data:`LEMMA1_MAX_M` contexts).

**Not separable** (``RTP infeas``, ``SOL 0``, one derived constraint): a Farkas ray
:math:`a \in \mathbb{Q}^{V \times m}` (:mod:`ntpcert.exact.separability`) with
:math:`\sum_j a_j h_j^\top = 0`, :math:`\mathbf 1^\top a_j = 0`, :math:`a_{j,v} \le 0` off the supports
splits as :math:`a_j = \sum_{v \notin S_j} (-a_{j,v})(e_{z_j} - e_v) + \sum_{z \in S_j \setminus z_j} a_{j,z}(e_z - e_{z_j})`.
So the multipliers :math:`y_{j,v} = -a_{j,v} \ge 0` on ``g<j>_<v>`` and :math:`\lambda_{j,z} = a_{j,z}`
on ``e<j>_<z>`` form a suitable linear combination (VIPR's ``lin``) whose left side is
:math:`\mathrm{vec}(\sum_j a_j h_j^\top) = 0` and whose right side is :math:`\sum y > 0`: the absurdity
:math:`0 \ge \sum y`. The exact split's N-certificate (:class:`~ntpcert.verdict.SplitCertificate`) is
such a ray once its classes are expanded to tokens; it is re-checked (:func:`~ntpcert.exact.separability.check_ray`)
before it is written.

An undetermined verdict has nothing to export: :func:`vipr_text` says why instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterator

import numpy as np

from ntpcert.instance import NTPInstance
from ntpcert.verdict import EmbeddingsFullRank, FarkasRay, FeasiblePoint, SplitCertificate, Verdict

#: The VIPR file format version written.
VIPR_VERSION = "1.1"
#: Largest m for which the Lemma 1 point :math:`Z^\top (HH^\top)^{-1} H` is solved in rationals (an
#: m x m rational solve; beyond it the export of an ``EmbeddingsFullRank`` verdict says why not).
LEMMA1_MAX_M = 300


@dataclass(frozen=True)
class ViprExport:
    """A separability verdict as VIPR text.

    Attributes
    ----------
    text : str
        The whole certificate, ready for ``viprchk``.
    relation : str
        ``"feasible"`` (``RTP range -inf 0`` with a point) or ``"infeasible"`` (``RTP infeas``).
    n_vars, n_constraints : int
        V·d variables; r equality rows and q margin rows.
    source : str
        The witness kind it came from (``feasible-point``, ``embeddings-full-rank``, ``farkas-ray``, ``split``).
    """

    text: str
    relation: str
    n_vars: int
    n_constraints: int
    source: str


def _q(x: Fraction) -> str:
    """A rational as VIPR writes it: an integer, or ``p/q`` in lowest terms."""
    return str(x)


def _header(instance: NTPInstance, system, relation: str, source: str) -> list[str]:
    V, d = instance.V, instance.d
    names = [f"w{v}_{i}" for v in range(V) for i in range(d)]
    lines = [f"% ntpcert: NTP-separability (6) of an instance with m={instance.m}, d={d}, V={V}",
             "% variables w<v>_<i> = W[v, i]; e<j>_<z>: (6a) equality rows; g<j>_<v>: (6b) margin rows >= 1",
             f"% verdict: {relation} (from {source})",
             f"VER {VIPR_VERSION}", f"VAR {V * d}"]
    lines += [" ".join(names[s:s + 16]) for s in range(0, len(names), 16)]
    lines += ["INT 0", "OBJ min", "0", f"CON {system.n_eq + system.n_margin} 0"]
    lines += list(_constraint_lines(instance, system))
    return lines


def _constraint_lines(instance: NTPInstance, system) -> Iterator[str]:
    H = instance.embeddings
    d = instance.d
    cols = [np.flatnonzero(H[j]) for j in range(instance.m)]
    hq = [[_q(Fraction(*float(H[j, i]).as_integer_ratio())) for i in cols[j]] for j in range(instance.m)]
    neg = [[s[1:] if s.startswith("-") else "-" + s for s in row] for row in hq]

    def row(j: int, plus: int, minus: int) -> str:
        parts = [str(2 * len(cols[j]))]
        for i, a, b in zip(cols[j], hq[j], neg[j]):
            parts.append(f"{plus * d + i} {a} {minus * d + i} {b}")
        return " ".join(parts)

    for j, z, a in zip(system.eq_context.tolist(), system.eq_token.tolist(), system.eq_anchor.tolist()):
        yield f"e{j}_{z} E 0 {row(j, z, a)}"
    for j, v, a in zip(system.mar_context.tolist(), system.mar_token.tolist(), system.mar_anchor.tolist()):
        yield f"g{j}_{v} G 1 {row(j, a, v)}"


def feasible_text(instance: NTPInstance, W, *, source: str = "feasible-point") -> ViprExport:
    """The VIPR certificate that (6) is feasible, shown by the exact point ``W``.

    Parameters
    ----------
    instance : NTPInstance
    W : array-like of shape (V, d)
        Exact rationals (Fractions, ints or dyadic floats), claimed to satisfy (6a) and (6b).
    source : str
        The witness kind, for the comment line.
    """
    from ntpcert.exact.rational import frac
    from ntpcert.rows.kesler import KeslerSystem

    system = KeslerSystem.build(instance)
    W = np.asarray(W, dtype=object)
    if W.shape != (instance.V, instance.d):
        raise ValueError(f"W: shape {W.shape}, expected ({instance.V}, {instance.d})")
    entries = [(k, frac(x)) for k, x in enumerate(W.reshape(-1).tolist())]
    entries = [(k, x) for k, x in entries if x != 0]
    lines = _header(instance, system, "feasible", source)
    lines += ["RTP range -inf 0", "SOL 1",
              "point " + " ".join([str(len(entries))] + [f"{k} {_q(x)}" for k, x in entries]), "DER 0", ""]
    return ViprExport("\n".join(lines), "feasible", instance.V * instance.d, system.n_eq + system.n_margin, source)


def infeasible_text(instance: NTPInstance, ray: dict, *, source: str = "farkas-ray") -> ViprExport:
    """The VIPR certificate that (6) is infeasible: one ``lin`` derivation of :math:`0 \\ge \\sum y` from a
    Farkas ray ``{(v, j): Fraction}`` (module doc). Raises ValueError when the ray fails
    :func:`~ntpcert.exact.separability.check_ray`."""
    from ntpcert.exact.rational import frac
    from ntpcert.exact.separability import check_ray
    from ntpcert.rows.kesler import KeslerSystem

    ray = {(int(v), int(j)): frac(x) for (v, j), x in ray.items()}
    why = check_ray(instance, ray)
    if why:
        raise ValueError(f"ray: not a Farkas ray of (6): {why}")
    system = KeslerSystem.build(instance)
    eq_index = {(j, z): i for i, (j, z) in enumerate(zip(system.eq_context.tolist(), system.eq_token.tolist()))}
    mar_index = {(j, v): system.n_eq + i
                 for i, (j, v) in enumerate(zip(system.mar_context.tolist(), system.mar_token.tolist()))}
    mult: dict[int, Fraction] = {}
    total = Fraction(0)
    for (v, j), x in ray.items():
        if x == 0:
            continue
        if (j, v) in mar_index:  # off the support: y = -a >= 0 on the margin row
            mult[mar_index[(j, v)]] = -x
            total -= x
        elif (j, v) in eq_index:  # in the support, not the anchor: lambda = a on the equality row
            mult[eq_index[(j, v)]] = x
        # the anchor's entry is -(the rest of its column): it is no row of its own
    lines = _header(instance, system, "infeasible", source)
    n_con = system.n_eq + system.n_margin
    reason = " ".join([str(len(mult))] + [f"{i} {_q(mult[i])}" for i in sorted(mult)])
    lines += ["RTP infeas", "SOL 0", "DER 1", f"farkas G {_q(total)} 0 {{ lin {reason} }} -1", ""]
    return ViprExport("\n".join(lines), "infeasible", instance.V * instance.d, n_con, source)


def lemma1_point(instance: NTPInstance) -> np.ndarray:
    r"""The exact W = :math:`Z^\top (HH^\top)^{-1} H` of the module doc (object array of Fractions, shape
    (V, d)): every in-support logit 1, every other 0. Needs rank H = m."""
    import flint

    from ntpcert.exact.rational import frac

    H = instance.embeddings
    m, d, V = instance.m, instance.d, instance.V
    Hq = flint.fmpq_mat(m, d, [flint.fmpq(*float(x).as_integer_ratio()) for x in H.reshape(-1).tolist()])
    mask = instance.support_mask()
    Zt = flint.fmpq_mat(m, V, [1 if b else 0 for b in mask.reshape(-1).tolist()])
    Y = (Hq * Hq.transpose()).solve(Zt)
    Wt = Hq.transpose() * Y  # (d, V)
    out = np.empty((V, d), dtype=object)
    for v in range(V):
        for i in range(d):
            out[v, i] = frac(Wt[i, v])
    return out


def _split_ray(instance: NTPInstance, split) -> dict:
    """The split's N-certificate on the whole vocabulary: :math:`a_{v,j} = \\text{dual}[(c(v), j)]`."""
    of = np.asarray(split.of_token).tolist()
    by_class: dict[int, list[int]] = {}
    for v, c in enumerate(of):
        by_class.setdefault(int(c), []).append(v)
    ray = {}
    for (c, j), x in split.dual.items():
        for v in by_class.get(int(c), []):
            ray[(v, int(j))] = x
    return ray


def vipr_text(instance: NTPInstance, verdict: Verdict) -> tuple[ViprExport | None, str]:
    """The separability ``verdict`` on ``instance`` as VIPR: ``(export, "")``, or ``(None, why not)`` for
    a verdict without an exact witness that VIPR can state (undetermined; a point or ray still in floats;
    Lemma 1 past :data:`LEMMA1_MAX_M` contexts)."""
    w = verdict.witness
    if isinstance(w, FeasiblePoint):
        if w.point is not None:
            return feasible_text(instance, w.point.fractions(), source=w.kind), ""
        return None, "the feasible point is in floating point only (certify --exact makes it exact)"
    if isinstance(w, EmbeddingsFullRank):
        if instance.m > LEMMA1_MAX_M:
            return None, (f"rank H = m (Lemma 1) is exported with an explicit point only up to m = {LEMMA1_MAX_M} "
                          f"contexts (here m = {instance.m})")
        return feasible_text(instance, lemma1_point(instance), source=w.kind), ""
    if isinstance(w, FarkasRay):
        return infeasible_text(instance, w.ray, source=w.kind), ""
    if isinstance(w, SplitCertificate):
        return infeasible_text(instance, _split_ray(instance, w.split), source=w.kind), ""
    return None, f"the separability verdict has no exact witness to export ({w.kind}: {w.text})"


def write_vipr(path, instance: NTPInstance, verdict: Verdict) -> tuple[ViprExport | None, str]:
    """:func:`vipr_text` written to ``path`` (whole or not at all); nothing is written when it says why not."""
    from ntpcert.util.files import atomic_write_text

    export, why = vipr_text(instance, verdict)
    if export is not None:
        atomic_write_text(path, export.text)
    return export, why


__all__ = ["LEMMA1_MAX_M", "VIPR_VERSION", "ViprExport", "feasible_text", "infeasible_text", "lemma1_point",
           "vipr_text", "write_vipr"]
