"""The verdicts of :func:`~ntpcert.geometry.bottleneck.argmaxability`, their witnesses, the JSON report
and the certificate file (docs/bottleneck.md lists the keys)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ntpcert.geometry.bottleneck.format import FORMAT, VERSION, decoder_sha256

__all__ = ["ARGMAXABLE", "KINDS", "UNARGMAXABLE", "UNDETERMINED", "BottleneckResult", "Witnesses"]

#: Verdict codes of :attr:`BottleneckResult.verdict`.
ARGMAXABLE, UNARGMAXABLE, UNDETERMINED = 1, 0, -1

#: Witness kinds, and the verdict each shows: ``row`` (the token's own direction w_v - mu), ``found``
#: (another token's direction), ``lp`` (an LP's point), ``alone`` (V = 1), ``farkas`` (a convex
#: combination of other rows), ``duplicate`` (an identical row).
KINDS = {"row": True, "found": True, "lp": True, "alone": True, "farkas": False, "duplicate": False}


@dataclass(eq=False)
class Witnesses:
    """Per-token witnesses (arrays of length V, and dicts for the few LP ones)."""

    source: np.ndarray
    bits: np.ndarray
    c: np.ndarray
    twin: np.ndarray
    point: dict[int, np.ndarray] = field(default_factory=dict)
    farkas: dict[int, tuple[tuple[int, ...], tuple[Fraction, ...]]] = field(default_factory=dict)
    why: dict[int, str] = field(default_factory=dict)
    alone: bool = False

    @classmethod
    def empty(cls, V: int) -> "Witnesses":
        return cls(np.full(V, -1, dtype=np.int64), np.zeros(V, dtype=np.int64), np.zeros(V), np.full(V, -1, np.int64))

    def kind(self, v: int) -> str | None:
        if self.twin[v] >= 0:
            return "duplicate"
        if self.source[v] >= 0:
            return "row" if self.source[v] == v else "found"
        if v in self.point:
            return "lp"
        if v in self.farkas:
            return "farkas"
        if self.alone:
            return "alone"
        return None


@dataclass(frozen=True, eq=False)
class BottleneckResult:
    """Argmaxability of every token of a fixed decoder.

    Attributes
    ----------
    V, d : int
    bias : bool
    verdict : ndarray of shape (V,), int8
        :data:`ARGMAXABLE` (1), :data:`UNARGMAXABLE` (0) or :data:`UNDETERMINED` (-1).
    witnesses : Witnesses
    center : ndarray of shape (d,)
        The mean row, the centre of the row directions.
    seconds : dict
        Wall time of each stage (duplicates, rows, lp, total): a report, never a verdict's cause.
    lp_tokens, lp_rounds : int
        Tokens sent to the LP, and LPs solved.
    budgets : dict
    """

    V: int
    d: int
    bias: bool
    verdict: np.ndarray
    witnesses: Witnesses
    center: np.ndarray
    seconds: dict
    lp_tokens: int
    lp_rounds: int
    budgets: dict

    @property
    def unargmaxable(self) -> list[int]:
        return np.flatnonzero(self.verdict == UNARGMAXABLE).tolist()

    @property
    def undetermined(self) -> list[int]:
        return np.flatnonzero(self.verdict == UNDETERMINED).tolist()

    def counts(self) -> dict:
        kinds: dict[str, int] = {}
        for v in range(self.V):
            k = self.witnesses.kind(v) if self.verdict[v] != UNDETERMINED else "undetermined"
            kinds[k] = kinds.get(k, 0) + 1
        return {"tokens": self.V, "argmaxable": int(np.sum(self.verdict == ARGMAXABLE)),
                "unargmaxable": int(np.sum(self.verdict == UNARGMAXABLE)),
                "undetermined": int(np.sum(self.verdict == UNDETERMINED)), "by_witness": kinds}

    def token(self, v: int) -> dict:
        """One token's entry of the JSON report."""
        code = int(self.verdict[v])
        if code == UNDETERMINED:
            return {"id": v, "argmaxable": "undetermined", "witness": None, "why": self.witnesses.why.get(v, "")}
        out: dict[str, Any] = {"id": v, "argmaxable": code == ARGMAXABLE, "witness": self.witnesses.kind(v)}
        w = self.witnesses
        if out["witness"] == "found":
            out["source"] = int(w.source[v])
        elif out["witness"] == "duplicate":
            out["tied_with"] = int(w.twin[v])
        elif out["witness"] == "farkas":
            out["support"] = len(w.farkas[v][0])
        return out

    def to_json(self, *, tokens: bool = True, certificate: str | None = None) -> dict:
        out: dict[str, Any] = {
            "V": self.V, "d": self.d, "bias": self.bias,
            "unargmaxable": self.unargmaxable, "undetermined": self.undetermined,
            "counts": self.counts(), "lp": {"tokens": self.lp_tokens, "rounds": self.lp_rounds},
            "budgets": self.budgets, "timings": {k: round(float(s), 4) for k, s in self.seconds.items()},
        }
        if certificate is not None:
            out["certificate"] = certificate
        if tokens:
            out["tokens"] = [self.token(v) for v in range(self.V)]
        return out

    def certificate(self, W: np.ndarray, b: np.ndarray | None) -> dict:
        """The certificate file's object: the decoder's fingerprint and every witness (docs/bottleneck.md)."""
        w = self.witnesses
        rows = np.flatnonzero(w.source >= 0)
        cert: dict[str, Any] = {
            "format": FORMAT, "version": VERSION,
            "decoder": {"V": self.V, "d": self.d, "bias": self.bias, "sha256": decoder_sha256(W, b)},
            "center": [float(x) for x in self.center],
            "rows": {"tokens": rows.tolist(), "sources": w.source[rows].tolist(), "bits": w.bits[rows].tolist(),
                     **({"c": [int(x) for x in w.c[rows]]} if self.bias else {})},
            "points": [{"token": v, "x": [float(t) for t in x]} for v, x in sorted(w.point.items())],
            "alone": bool(w.alone),
            "combinations": [_combination(v, s, lam) for v, (s, lam) in sorted(w.farkas.items())],
            "duplicates": [{"token": int(v), "twin": int(w.twin[v])} for v in np.flatnonzero(w.twin >= 0)],
            "undetermined": [{"token": v, "why": w.why.get(v, "")} for v in self.undetermined],
        }
        return cert


def _combination(v: int, support: tuple[int, ...], lam: tuple[Fraction, ...]) -> dict:
    """A convex combination as the certificate writes it: integer numerators over one common denominator, as
    decimal text (a combination of about d + 1 rows has weights of thousands of digits)."""
    from math import lcm

    from ntpcert.certificate.jsonio import unlimited_int_digits

    den = lcm(*(q.denominator for q in lam))
    with unlimited_int_digits():
        return {"token": int(v), "support": [int(u) for u in support],
                "numerators": [str(q.numerator * (den // q.denominator)) for q in lam], "denominator": str(den)}
