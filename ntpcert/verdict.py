r"""One verdict type for both questions, float and exact: ``Verdict(holds, witness)``.

A verdict says whether NTP-compatibility (4) or NTP-separability (6) holds: ``holds`` is True, False
or None (undetermined), and ``witness`` is what shows it, one of a small closed set of frozen values:

=========================  =======  ===============================================================
witness                    holds    what it is
=========================  =======  ===============================================================
``NoEquations``            True     every support has one token: (4) has no equation
``EmbeddingsFullRank``     True     rank H = m (Lemma 1): every logit matrix is reachable
``FullRowRank``            True     :math:`A_{eq}` has full row rank (its Gram matrix mod a prime)
``NullSpaceBasis``         True     exact left null vectors spanning null(:math:`A_{eq}^\top`), all
                                    with :math:`y^\top b = 0`
``ParticularSolutions``    True     exact :math:`R_p` with :math:`A_{eq}\mathrm{vec}(R_p) = E_p`
``ViolatingNullVector``    False    :math:`A_{eq}^\top y = 0` with :math:`y^\top b \ne 0`
``FeasiblePoint``          True     a W with every margin at least 1 and (6a) satisfied
``FarkasRay``              False    a ray of the Farkas system of (6)
``SplitCertificate``       False    the split of the out-of-support pairs into separable ones (a
                                    D_P in the recession cone) and implicit equalities N (a
                                    vanishing combination negative on N), N non-empty
``Undetermined``           None     why neither was shown, and what would settle it
=========================  =======  ===============================================================

Every witness carries its ``engine``, the short key of the argument that found it (the JSON key,
:mod:`ntpcert.pipeline.decide`), its ``text`` (the witness in words), the certificate section that
holds it (``SECTION``), and its own exact check (:meth:`Witness.check`). A witness found in floating
point is made exact by one method, :meth:`Verdict.exact`; float and exact reports share the type. The
set is closed: a witness class cannot be defined outside this module, and a verdict refuses any other
value as its witness.

One vocabulary: ``holds``, ``engine``, ``witness``, ``reason`` (the witness in words, or why the
verdict is undetermined).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from ntpcert.exact.rank_witness import RankWitness
from ntpcert.instance import NTPInstance


class Witness:
    """A witness of a verdict; the kinds are the classes of this module, and no other."""

    #: The engines (JSON keys) that may find this kind; a trailing ``*`` admits any suffix.
    ENGINES: ClassVar[tuple[str, ...]] = ()
    #: The verdict this kind shows.
    SHOWS: ClassVar[bool | None] = None
    #: The certificate section (key) that holds it.
    SECTION: ClassVar[str] = ""
    #: Engines whose witness is exact as found (checked in exact arithmetic when it was found).
    EXACT_ENGINES: ClassVar[tuple[str, ...]] = ()

    engine: str | None
    text: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if cls.__module__ != __name__:
            raise TypeError(f"{cls.__name__}: the witness kinds are closed; a new kind belongs in {__name__}")
        super().__init_subclass__(**kwargs)

    def _check_engine(self) -> None:
        ok = any(self.engine == e or (e.endswith("*") and str(self.engine).startswith(e[:-1])) for e in self.ENGINES)
        if not ok:
            raise ValueError(f"{type(self).__name__}: unknown engine {self.engine!r} (expected one of "
                             f"{', '.join(self.ENGINES)})")

    def __post_init__(self) -> None:
        self._check_engine()

    @property
    def kind(self) -> str:
        """The kind's JSON name, e.g. ``farkas-ray``."""
        return _KIND_NAMES[type(self)]

    @property
    def is_exact(self) -> bool:
        """Whether the witness was checked in exact arithmetic when found (else :meth:`Verdict.exact`
        makes it so, or says why it cannot)."""
        return self.engine in self.EXACT_ENGINES

    def check(self, instance: NTPInstance) -> str:
        """Exact check of the witness on ``instance``: ``""`` when it shows its verdict, else the first
        failure."""
        raise NotImplementedError

    def to_exact(self, instance: NTPInstance, **options: Any) -> "Witness":
        """This witness made exact: itself when it was checked exactly when found, else an
        :class:`Undetermined` saying why it cannot be (:class:`FeasiblePoint` repairs its point)."""
        if self.is_exact:
            return self
        return Undetermined(f"{self.text}; the witness ({self.engine}) is not exact")

    def summary(self) -> dict:
        """Short JSON facts of the witness (sizes, primes), beyond its kind and engine."""
        return {}


def _system(instance: NTPInstance):
    from ntpcert.rows.kesler import KeslerSystem

    return KeslerSystem.build(instance)


def _null_vector(system, y: dict) -> np.ndarray | None:
    """``{(j, z): int}`` as a vector over the equality rows of ``system``; None when a key is not a row."""
    index = {(int(c), int(t)): i for i, (c, t) in enumerate(zip(system.eq_context, system.eq_token))}
    out = np.zeros(system.n_eq, dtype=object)
    for key, v in y.items():
        i = index.get((int(key[0]), int(key[1])))
        if i is None or Fraction(v).denominator != 1:
            return None
        out[i] = int(v)
    return out


@dataclass(frozen=True, eq=False)
class NoEquations(Witness):
    """(4) has no equation: every support has one token."""

    ENGINES = EXACT_ENGINES = ("no-equations",)
    SHOWS = True
    SECTION = "null_space_basis"

    engine: str = "no-equations"
    text: str = "no equations: every support has one token"

    @property
    def rank(self) -> int:
        return 0

    def check(self, instance: NTPInstance) -> str:
        return "" if int(instance.support_sizes.max()) <= 1 else "a support has more than one token"


@dataclass(frozen=True, eq=False)
class EmbeddingsFullRank(Witness):
    """rank H = m (Lemma 1), certified by :class:`~ntpcert.exact.rank_witness.RankWitness`: both (4) and
    (6) hold."""

    ENGINES = EXACT_ENGINES = ("lemma1",)
    SHOWS = True
    SECTION = "embeddings_rank_witness"

    rank_witness: RankWitness = field(default=None)  # type: ignore[assignment]
    text: str = ""
    engine: str = "lemma1"
    #: rank A_eq (= r, full) when it serves compatibility.
    rank: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.rank_witness, RankWitness) or not self.rank_witness.full:
            raise ValueError("EmbeddingsFullRank: rank_witness must be a full RankWitness")

    @property
    def modulus(self) -> int | None:
        return self.rank_witness.modulus

    def check(self, instance: NTPInstance) -> str:
        from ntpcert.exact.rank_witness import check_rank_witness

        return check_rank_witness(instance.embeddings, self.rank_witness.to_json(), instance.m)

    def summary(self) -> dict:
        return {"route": self.rank_witness.route, "modulus": self.rank_witness.modulus}


@dataclass(frozen=True, eq=False)
class FullRowRank(Witness):
    """:math:`A_{eq}` has full row rank r: its Gram matrix has rank r mod ``modulus`` (``gram-rank-mod-p``),
    or its smallest Gram eigenvalue clears a rounding bound (``float-rank``, no modulus: not exact)."""

    ENGINES = ("gram-rank-mod-p", "float-rank")
    EXACT_ENGINES = ("gram-rank-mod-p",)
    SHOWS = True
    SECTION = "rank_modulus"

    rank: int = 0
    modulus: int | None = None
    engine: str = "gram-rank-mod-p"
    text: str = ""

    def check(self, instance: NTPInstance) -> str:
        if self.modulus is None:
            return "no prime: the full row rank was shown in floating point only"
        import flint

        from ntpcert.exact.modular import gram_residues

        s = _system(instance)
        R = gram_residues(instance.embeddings, s.eq_context, s.eq_token, s.eq_anchor, self.modulus)
        got = flint.nmod_mat(s.n_eq, s.n_eq, R.ravel().tolist(), self.modulus).rank() if s.n_eq else 0
        return "" if got == s.n_eq == self.rank else f"the Gram matrix has rank {got} mod {self.modulus}, not r = {s.n_eq}"

    def summary(self) -> dict:
        return {"modulus": self.modulus}


@dataclass(frozen=True, eq=False)
class NullSpaceBasis(Witness):
    r"""Exact left null vectors of :math:`A_{eq}` (``{(j, z): int}`` each) that span its left null space,
    every one with :math:`y^\top b = 0`. ``rank`` = rank :math:`A_{eq}` = dim F; ``modulus``: the prime of
    the rank bound (for ``frequent-tokens``, of the reduced system), None when it came from an exact
    fraction-free null space."""

    ENGINES = ("null-space", "frequent-tokens", "exact-null-space", "float-null-vectors")
    EXACT_ENGINES = ("null-space", "frequent-tokens", "exact-null-space")
    SHOWS = True
    SECTION = "null_space_basis"

    basis: tuple = ()
    rank: int | None = None
    modulus: int | None = None
    engine: str = "null-space"
    text: str = ""

    def check(self, instance: NTPInstance) -> str:
        from ntpcert.exact.left_null import exact_left_null, log_odds_sign

        s = _system(instance)
        for k, y in enumerate(self.basis):
            vec = _null_vector(s, y)
            if vec is None or not exact_left_null(s, vec):
                return f"basis vector {k} is not an exact left null vector of A_eq"
            if log_odds_sign(s, vec) != 0:
                return f"basis vector {k} has y^T b != 0"
        if self.rank is not None and self.rank + len(self.basis) != s.n_eq:
            return f"rank {self.rank} + {len(self.basis)} null vectors != r = {s.n_eq}"
        return ""

    def summary(self) -> dict:
        return {"null_vectors": len(self.basis), "modulus": self.modulus}


@dataclass(frozen=True, eq=False)
class ParticularSolutions(Witness):
    r"""Exact :math:`R_p` (``{p: {(v, i): Fraction}}``) with :math:`A_{eq}\,\mathrm{vec}(R_p) = E_{:,p}`
    for every prime p of the count ratios, so :math:`W = \sum_p \log(p) R_p` solves (4)
    (:func:`ntpcert.exact.compatibility.check_compatibility_by_columns`)."""

    ENGINES = EXACT_ENGINES = ("particular-solutions",)
    SHOWS = True
    SECTION = "particular_solutions"

    particular: dict = field(default_factory=dict)
    rank: int | None = None
    engine: str = "particular-solutions"
    text: str = ""

    def check(self, instance: NTPInstance) -> str:
        from ntpcert.exact.compatibility import eq_rows, prime_exponents

        primes, E = prime_exponents(instance)
        H = instance.embeddings
        for q, p in enumerate(primes):
            R = self.particular.get(p, {})
            for row, (j, z, a) in enumerate(eq_rows(instance)):
                got = sum(((x if v == z else -x) * Fraction(float(H[j, i]))
                           for (v, i), x in R.items() if v in (z, a)), Fraction(0))
                if got != int(E[row, q]):
                    return f"A_eq vec(R_{p}) differs from E at the row of context {j}, token {z}"
        return ""

    def describe(self) -> str:
        k = sum(1 for R in self.particular.values() if R)
        if k == 0:
            return "every count ratio is 1 (b = 0), so W = 0 solves (4)"
        return (f"R_p with A_eq vec(R_p) = E_p for the {k} prime{'s' if k != 1 else ''} whose exponents move, "
                "so W = sum_p log(p) R_p solves (4)")

    def summary(self) -> dict:
        return {"primes": sorted(int(p) for p, R in self.particular.items() if R)}


@dataclass(frozen=True, eq=False)
class ViolatingNullVector(Witness):
    r"""A left null vector y of :math:`A_{eq}` (``{(j, z): int}`` over the equality rows) with
    :math:`y^\top b \ne 0`: (4) has no solution."""

    ENGINES = ("null-vector", "part-null-vector", "pair-null-vector", "frequent-tokens-null-vector",
               "exact-null-space", "float-null-vectors")
    EXACT_ENGINES = ("null-vector", "part-null-vector", "pair-null-vector", "frequent-tokens-null-vector",
                     "exact-null-space")
    SHOWS = False
    SECTION = "violating_null_vector"

    y: dict = field(default_factory=dict)
    engine: str = "null-vector"
    text: str = ""
    #: rank A_eq (= dim F) when known exactly.
    rank: int | None = None

    def check(self, instance: NTPInstance) -> str:
        from ntpcert.exact.left_null import exact_left_null, log_odds_sign

        s = _system(instance)
        vec = _null_vector(s, self.y)
        if vec is None or not any(vec):
            return "y is not an integer vector over the equality rows"
        if not exact_left_null(s, vec):
            return "A_eq^T y != 0"
        if not log_odds_sign(s, vec):
            return "y^T b is 0 or undecided"
        return ""

    def summary(self) -> dict:
        return {"nonzeros": len(self.y)}


@dataclass(frozen=True, eq=False)
class FeasiblePoint(Witness):
    """A W of shape (V, d) with (6a) and every margin of (6b) at least 1: in floats (``W``, re-checked
    against its rounding bound) or exact (``point``, :class:`~ntpcert.exact.separability.ExactPoint`)."""

    ENGINES = ("vacuous", "structured-point", "highs-point", "split-point", "svm-point:*", "exact-point")
    EXACT_ENGINES = ("vacuous", "exact-point")
    SHOWS = True
    SECTION = "W"

    W: np.ndarray | None = None
    engine: str = "structured-point"
    text: str = ""
    min_margin: float | None = None
    eq_violation: float | None = None
    #: The exact point, once made exact.
    point: Any = None

    @property
    def is_exact(self) -> bool:
        return self.point is not None

    def to_exact(self, instance: NTPInstance, **options: Any) -> Witness:
        """The float point repaired exactly onto the constraints (:func:`ntpcert.exact.separability.
        exact_feasible_point`; ``options``: ``bounder``, ``bits``), or :class:`Undetermined` saying why not."""
        if self.point is not None:
            return self
        from ntpcert.exact.separability import exact_feasible_point

        point, ell, why = exact_feasible_point(instance, self.W, **options)
        if point is None:
            return Undetermined(f"feasible point not exact: {why}")
        return FeasiblePoint(W=self.W, engine="exact-point", point=point, min_margin=ell,
                             text=f"exact feasible point (from {self.engine}), margins >= 1")

    def check(self, instance: NTPInstance) -> str:
        from ntpcert.exact.rational import frac

        if self.point is None:
            return "the point is in floating point only (Verdict.exact makes it exact)"
        Wq = self.point.fractions()
        H = instance.embeddings
        mask = instance.support_mask()
        for j in range(instance.m):
            h = [frac(x) for x in H[j]]
            z = [sum((Wq[v, i] * h[i] for i in range(instance.d) if h[i]), Fraction(0)) for v in range(instance.V)]
            sup = [z[v] for v in np.flatnonzero(mask[j])]
            if any(s != sup[0] for s in sup):
                return f"(6a) fails at context {j}"
            if any(sup[0] - z[v] < 1 for v in np.flatnonzero(~mask[j])):
                return f"a margin below 1 at context {j}"
        return ""

    def summary(self) -> dict:
        return {"min_margin": self.min_margin, "eq_violation": self.eq_violation}


@dataclass(frozen=True, eq=False)
class FarkasRay(Witness):
    """A ray ``{(v, j): Fraction}`` of the Farkas system of (6) (:mod:`ntpcert.exact.separability`),
    checked exactly: (6) has no solution."""

    ENGINES = EXACT_ENGINES = ("part-farkas", "pair-farkas", "structured-farkas", "highs-farkas", "split-farkas")
    SHOWS = False
    SECTION = "ray"

    ray: dict = field(default_factory=dict)
    engine: str = "structured-farkas"
    text: str = ""

    def check(self, instance: NTPInstance) -> str:
        from ntpcert.exact.separability import check_ray

        for v, j in self.ray:
            if not (0 <= v < instance.V and 0 <= j < instance.m):
                return f"index ({v}, {j}) out of range"
        return check_ray(instance, self.ray)

    def summary(self) -> dict:
        return {"nonzeros": len(self.ray)}


@dataclass(frozen=True, eq=False)
class SplitCertificate(Witness):
    """The exact split (:class:`ntpcert.exact.split.ExactSplit`) with a non-empty N: its N-certificate
    is a Farkas ray of (6) (each N pair negative), so (6) has no solution; its D_P shows every other
    out-of-support pair separable. Section ``split`` of the certificate."""

    ENGINES = EXACT_ENGINES = ("split-lp",)
    SHOWS = False
    SECTION = "split"

    split: Any = None
    engine: str = "split-lp"
    text: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.split is None or not getattr(self.split, "ok", False) or not len(self.split.nonseparable):
            raise ValueError("SplitCertificate: needs an exact split with at least one non-separable pair")

    def check(self, instance: NTPInstance) -> str:
        from ntpcert.exact.split import check_exact_split

        return check_exact_split(instance, self.split)

    def summary(self) -> dict:
        return {"nonseparable_pairs": int(len(self.split.nonseparable)), "separable_pairs": int(self.split.n_separable)}


@dataclass(frozen=True, eq=False)
class Undetermined(Witness):
    """Neither a proof nor a refutation was checked: ``text`` says why, and what would settle it."""

    SHOWS = None
    SECTION = "reason"

    text: str = "undetermined"
    engine: None = None

    def _check_engine(self) -> None:
        if self.engine is not None:
            raise ValueError("Undetermined: no engine decided")

    @property
    def is_exact(self) -> bool:
        return True

    def check(self, instance: NTPInstance) -> str:
        return ""


_KIND_NAMES = {NoEquations: "no-equations", EmbeddingsFullRank: "embeddings-full-rank", FullRowRank: "full-row-rank",
               NullSpaceBasis: "null-space-basis", ParticularSolutions: "particular-solutions",
               ViolatingNullVector: "violating-null-vector", FeasiblePoint: "feasible-point", FarkasRay: "farkas-ray",
               SplitCertificate: "split", Undetermined: "undetermined"}
#: The closed set of witness kinds.
WITNESS_KINDS = tuple(_KIND_NAMES)


@dataclass(frozen=True, eq=False)
class Verdict:
    """Whether (4) or (6) holds (``holds``: True, False, None), and the ``witness`` that shows it.

    Attributes
    ----------
    holds : bool or None
    witness : one of :data:`WITNESS_KINDS`
        Its kind fixes ``holds`` (a Farkas ray shows False, an undetermined verdict None).
    """

    holds: bool | None
    witness: Witness

    def __post_init__(self) -> None:
        if type(self.witness) not in _KIND_NAMES:
            raise TypeError(f"Verdict: unknown witness kind {type(self.witness).__name__} (expected one of "
                            f"{', '.join(k.__name__ for k in WITNESS_KINDS)})")
        if self.holds is not self.witness.SHOWS:
            raise ValueError(f"Verdict: a {type(self.witness).__name__} shows holds={self.witness.SHOWS}, "
                             f"not {self.holds}")

    def __bool__(self) -> bool:
        raise TypeError("a Verdict has three values: test verdict.holds (True, False or None)")

    def __repr__(self) -> str:
        """One short line: the answer, the engine and the witness's kind (a Farkas ray or a point can hold
        thousands of rationals; ``witness`` has them)."""
        why = self.reason
        why = why if len(why) <= 80 else why[:77] + "..."
        return (f"Verdict(holds={self.holds}, engine={self.engine!r}, witness={type(self.witness).__name__}, "
                f"reason={why!r})")

    @classmethod
    def of(cls, witness: Witness) -> "Verdict":
        """The verdict ``witness`` shows."""
        return cls(witness.SHOWS, witness)

    @classmethod
    def undetermined(cls, reason: str) -> "Verdict":
        return cls(None, Undetermined(reason))

    @property
    def engine(self) -> str | None:
        """The short key of the argument that decided, None when undetermined."""
        return self.witness.engine

    @property
    def reason(self) -> str:
        """The witness in words, or why the verdict is undetermined."""
        return self.witness.text

    @property
    def is_exact(self) -> bool:
        return self.witness.is_exact

    def check(self, instance: NTPInstance) -> str:
        """The witness's own exact check (:meth:`Witness.check`)."""
        return self.witness.check(instance)

    def exact(self, instance: NTPInstance, **options: Any) -> "Verdict":
        """This verdict with an exact witness (:meth:`Witness.to_exact`): the same verdict when its witness
        was checked exactly when found; a float feasible point repaired exactly; otherwise undetermined,
        saying why."""
        if self.is_exact:
            return self
        return Verdict.of(self.witness.to_exact(instance, **options))

    def to_json(self) -> dict:
        """``holds``, ``engine``, ``witness`` (the kind), ``reason`` and the witness's short facts."""
        return {"holds": self.holds, "engine": self.engine, "witness": self.witness.kind, "reason": self.reason,
                "exact": self.is_exact, **self.witness.summary()}


__all__ = ["EmbeddingsFullRank", "FarkasRay", "FeasiblePoint", "FullRowRank", "NoEquations", "NullSpaceBasis",
           "ParticularSolutions", "SplitCertificate", "Undetermined", "Verdict", "ViolatingNullVector", "WITNESS_KINDS", "Witness"]
