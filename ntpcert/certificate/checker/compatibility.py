r"""The checker's ``compatibility`` section: a claim of (4), re-derived from the instance.

Whatever the claim, ``n_eq`` and ``primes`` are recomputed. A true claim is checked by its null-space
basis (each vector exactly in :math:`\mathrm{null}(A_{eq}^\top)` with :math:`y^\top E = 0`, independent,
and accounting for all of it by ``dim_F``: the exact rank of G, a rank mod p, Lemma 1's rank of H, or
the frequent-token reduction rebuilt by :mod:`ntpcert.certificate.checker.reduction`), or, for tall
systems, by one exact particular solution per prime; a false claim by a violating null vector with
:math:`y^\top E \ne 0`. The optional closed form of W* is checked against G.
"""

from __future__ import annotations

from typing import Any

import flint

from ntpcert.certificate.checker.common import list_text, need
from ntpcert.certificate.checker.exact import ExactInstance
from ntpcert.certificate.checker.reduction import left_null_dimension_bound
from ntpcert.certificate.decode import sparse_dict
from ntpcert.certificate.schema import show
from ntpcert.exact.modular import is_modulus
from ntpcert.exact.rank_witness import check_rank_witness
from ntpcert.util.numbers import lcm_all


def _short_int(v: int) -> str:
    """``v`` in decimal, or its sign and number of digits past 40 digits (a check line stays one line)."""
    text = str(v)
    return text if len(text.lstrip("-")) <= 40 else f"{'-' if v < 0 else ''}(an integer of {len(text.lstrip('-')):,} digits)"


def _log_sum_text(viol: dict) -> str:
    """``Σ v_p log p`` as text: the first 6 terms, then how many more."""
    items = sorted(viol.items())
    text = " + ".join(f"{_short_int(v)}*log({p})" for p, v in items[:6])
    return text + (f" + ... ({len(items) - 6} more primes)" if len(items) > 6 else "")


def _integer_column(items: Any, name: str, ex: ExactInstance) -> tuple[flint.fmpz_mat, int]:
    """A sparse rational vector over the equality rows, times the lcm ``den`` of its denominators:
    an integer column of length r, and ``den``."""
    y = sparse_dict(items, name)
    den = lcm_all(v.denominator for v in y.values())
    col = flint.fmpz_mat(len(ex.rows), 1)
    for key, v in y.items():
        need(key in ex.row_index, f"{name}: ({key[0]}, {key[1]}) is not an equality row")
        col[ex.row_index[key], 0] = int(v * den)
    return col, den


def check_compatibility(sec: dict, ex: ExactInstance, checks: list[str]) -> bool | None:
    claim = sec["claim"]  # True, False or None: the schema chose this section's variant by it
    primes, Erows = ex.E()
    r = len(ex.rows)
    need(sec["n_eq"] == r, f"compatibility.n_eq: claims {show(sec['n_eq'])}, the instance has r = {r} equality rows")
    ratio_primes = ex.ratio_primes()
    need(sec["primes"] == ratio_primes,
          f"compatibility.primes: claims {list_text(sec['primes'])}, the count ratios have {list_text(ratio_primes)}")
    if claim is None:
        checks.append("compatibility undetermined (nothing to check)")
        return None

    def yE(y: dict[tuple[int, int], int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for key, c in y.items():
            for p, e in Erows[key].items():
                out[p] = out.get(p, 0) + c * e
        return {p: v for p, v in out.items() if v}

    if claim is False:
        y = _integer_vector(sec["violating_null_vector"], "compatibility.violating_null_vector", ex)
        need(ex.left_null(y), "compatibility.violating_null_vector: not in the left null space of A_eq")
        if sec["dim_F"] is not None:
            rank = ex.G.rank() if r else 0
            need(sec["dim_F"] == rank, f"compatibility.dim_F: claims {show(sec['dim_F'])}, rank A_eq is {rank}")
        viol = yE(y)
        need(bool(viol), "compatibility.violating_null_vector: y^T E = 0, so it shows nothing")
        checks.append(f"incompatible: y in null(A_eq^T) with y^T b = {_log_sum_text(viol)} != 0")
        return False
    if "particular_solutions" in sec:  # tall systems: one exact solution per prime, rank A_eq exactly
        _check_particular(sec, ex, primes, Erows, checks)
        return True
    basis = sec["null_space_basis"]
    ys = [_integer_vector(b, f"compatibility.null_space_basis[{k}]", ex) for k, b in enumerate(basis)]
    dim_F = sec["dim_F"]
    need(dim_F + len(ys) == r, f"compatibility.dim_F: {show(dim_F)} and {len(ys)} null-space basis vectors do "
          f"not add up to r = {r}")
    if "embeddings_rank_witness" in sec:
        check_embeddings_rank_witness(sec, "compatibility", ex)
        need(not ys, "compatibility.null_space_basis: A_eq has full row rank, its left null space is 0")
        checks.append(f"compatible: H has rank m = {ex.m} (peeled triangular pivots and a core mod p, re-checked), "
                      f"so A_eq has full row rank r = {r} and (4) is solvable (Lemma 1)")
        _w_star_if_given(sec, ex, primes, Erows, checks)
        return True
    if "embeddings_rank_modulus" in sec:
        p = sec["embeddings_rank_modulus"]
        need(is_modulus(p), f"compatibility.embeddings_rank_modulus: {show(p)} is not a prime 2 <= p < 2^63")
        need(ex.m <= ex.d and ex.rank_H_mod(p) == ex.m,
              f"compatibility.embeddings_rank_modulus: H does not have rank m = {ex.m} mod {p}")
        need(not ys, "compatibility.null_space_basis: A_eq has full row rank, its left null space is 0")
        checks.append(f"compatible: H has full row rank (rank m = {ex.m} mod {p}, d >= m), so A_eq has full row "
                      f"rank r = {r} and (4) is solvable (Lemma 1)")
        _w_star_if_given(sec, ex, primes, Erows, checks)
        return True
    for k, y in enumerate(ys):
        need(ex.left_null(y), f"compatibility.null_space_basis[{k}]: not in the left null space of A_eq")
        need(not yE(y), f"compatibility.null_space_basis[{k}]: y^T E != 0, contradicting the claim")
    if "frequent_tokens_modulus" in sec:  # the reduced system rebuilt here: an upper bound on dim null(A_eq^T)
        p = sec["frequent_tokens_modulus"]
        need(is_modulus(p), f"compatibility.frequent_tokens_modulus: {show(p)} is not a prime 2 <= p < 2^63")
        bound = left_null_dimension_bound(ex.inst, p)
        need(bound is not None, "compatibility.frequent_tokens_modulus: the reduced system is too large to rebuild")
        need(len(ys) >= bound, f"compatibility.frequent_tokens_modulus: the reduced system mod {p} leaves {bound} "
              f"null directions, the basis has {len(ys)} vectors")
        if ys:
            need(ex.rank_vectors_mod(ys, p) == len(ys), "compatibility.null_space_basis: the vectors are dependent "
                  f"mod {p}")
        checks.append(f"compatible: the frequent-token reduction mod {p} bounds dim null(A_eq^T) by {bound}, the "
                      f"{len(ys)} exact null vectors reach it and Y^T E = 0")
        _w_star_if_given(sec, ex, primes, Erows, checks)
        return True
    if "rank_modulus" in sec:
        p = sec["rank_modulus"]
        need(is_modulus(p), f"compatibility.rank_modulus: {show(p)} is not a prime 2 <= p < 2^63")
        rank_p = ex.rank_G_mod(p) if r else 0
        need(rank_p == dim_F, f"compatibility.rank_modulus: rank of G mod {p} is {rank_p}, not dim_F = {dim_F}")
        if ys:
            need(ex.rank_vectors_mod(ys, p) == len(ys), "compatibility.null_space_basis: the vectors are dependent "
                  f"mod {p}")
        how = f"rank G mod {p} = {dim_F} <= rank A_eq <= r - {len(ys)} independent exact null vectors"
    else:
        rank = ex.G.rank() if r else 0
        need(dim_F == rank, f"compatibility.dim_F: claims {show(dim_F)}, rank A_eq is {rank}")
        if ys:
            need(ex.rank_vectors_mod(ys, None) == len(ys), "compatibility.null_space_basis: the vectors are dependent")
        how = f"rank A_eq = {rank}"
    checks.append(f"compatible: null(A_eq^T) has dimension {len(ys)} and Y^T E = 0 ({how})")
    _w_star_if_given(sec, ex, primes, Erows, checks)
    return True


def _w_star_if_given(sec: dict, ex: ExactInstance, primes: list[int], Erows: dict, checks: list[str]) -> None:
    """The optional closed form of W*, checked beside every witness of a true claim that allows it (the rank
    witness and the frequent-token bound included, where it was once left unchecked)."""
    if "W_star" in sec:
        _check_w_star(sec["W_star"], ex, ex.G, primes, Erows, checks)


def _check_particular(sec: dict, ex: ExactInstance, primes: list[int], Erows: dict, checks: list[str]) -> None:
    r"""``particular_solutions``: for every prime p whose exponents move, a rational :math:`R_p` with
    :math:`A_{eq}\,\mathrm{vec}(R_p) = E_{:,p}`, row by row in integers
    (:math:`\sum_i \mathrm{Hint}_{j,i}(R_{z,i} - R_{z_j,i})\,D = E_{(j,z),p}\,D\,2^s` for the common
    denominator D of :math:`R_p`); then :math:`W = \sum_p \log(p) R_p` solves (4). ``dim_F`` is the
    exact rank of :math:`2^s A_{eq}` on the columns its rows use."""
    sols = sec["particular_solutions"]
    needed = {p for p in primes if any(Erows[k].get(p) for k in ex.rows)}
    given = {int(key) for key in sols}
    need(given == needed, f"compatibility.particular_solutions: primes {list_text(sorted(given))}, the count ratios "
          f"need {list_text(sorted(needed))}")
    for p in sorted(needed):
        name = f"compatibility.particular_solutions[{p}]"
        R = sparse_dict(sols[str(p)], name)
        den = lcm_all(x.denominator for x in R.values())
        Ri: dict[tuple[int, int], int] = {}
        for (v, i), x in R.items():
            need(v < ex.V and i < ex.d, f"{name}: index ({v}, {i}) is outside the (V, d) = ({ex.V}, {ex.d}) table")
            Ri[(v, i)] = int(x * den)
        target = den * ex.hden
        for (j, z) in ex.rows:
            a = ex.anchor[j]
            h = ex.hint_row(j)
            lhs = sum(x * (Ri.get((z, i), 0) - Ri.get((a, i), 0)) for i, x in enumerate(h) if x)
            need(lhs == Erows[(j, z)].get(p, 0) * target,
                  f"{name}: row ({j}, {z}) of A_eq vec(R_p) is not the exponent of {p} in its count ratio")
    cols: dict[tuple[int, int], int] = {}
    for j, z in ex.rows:
        for i, x in enumerate(ex.hint_row(j)):
            if x:
                cols.setdefault((z, i), len(cols))
                cols.setdefault((ex.anchor[j], i), len(cols))
    A = flint.fmpz_mat(len(ex.rows), max(len(cols), 1))
    for k, (j, z) in enumerate(ex.rows):
        for i, x in enumerate(ex.hint_row(j)):
            if x:
                A[k, cols[(z, i)]] += x
                A[k, cols[(ex.anchor[j], i)]] -= x
    rank = int(A.rank()) if ex.rows else 0
    need(sec["dim_F"] == rank, f"compatibility.dim_F: claims {show(sec['dim_F'])}, rank A_eq is {rank}")
    how = (f"A_eq vec(R_p) = E_p exactly for {len(needed)} prime{'s' if len(needed) != 1 else ''}, so "
           "W = sum_p log(p) R_p solves (4)") if needed else "every count ratio is 1 (b = 0), so W = 0 solves (4)"
    checks.append(f"compatible: {how} (rank A_eq = {rank} on the {len(cols)} columns its rows use)")


def check_embeddings_rank_witness(sec: dict, section: str, ex: ExactInstance) -> None:
    """Lemma 1's rank witness, re-checked on the instance's own H (:func:`check_rank_witness`)."""
    why = check_rank_witness(ex.inst.embeddings, sec["embeddings_rank_witness"], ex.m)
    need(not why, f"{section}.embeddings_rank_witness: {why}")


def is_prime(p: int) -> bool:
    """Whether the integer ``p`` is a prime (of any size; a modulus is checked by :func:`is_modulus`)."""
    return p >= 2 and bool(flint.fmpz(p).is_prime())


def _integer_vector(items: Any, name: str, ex: ExactInstance) -> dict[tuple[int, int], int]:
    """A sparse rational vector over the equality rows, scaled by the lcm of its denominators."""
    y = sparse_dict(items, name)
    den = lcm_all(v.denominator for v in y.values())
    out = {}
    for key, v in y.items():
        need(key in ex.row_index, f"{name}: ({key[0]}, {key[1]}) is not an equality row")
        out[key] = int(v * den)
    return out


def _check_w_star(ws: dict, ex: ExactInstance, G: flint.fmpz_mat, primes: list[int], Erows: dict, checks: list[str]) -> None:
    coeffs = ws["coefficients"]  # keys checked by the schema: primes in decimal
    needed = {p for p in primes if any(Erows[k].get(p) for k in ex.rows)}
    given = {int(key) for key in coeffs}
    need(given == needed, f"compatibility.W_star.coefficients: primes {list_text(sorted(given))}, the count ratios "
          f"need {list_text(sorted(needed))}")
    scale = ex.hden ** 2
    for p in sorted(needed):
        col, den = _integer_column(coeffs[str(p)], f"compatibility.W_star.coefficients[{p}]", ex)
        lhs = G * col  # = den * 2^(2s) * G g
        for i, key in enumerate(ex.rows):
            need(int(lhs[i, 0]) == Erows[key].get(p, 0) * den * scale,
                  f"compatibility.W_star.coefficients[{p}]: A_eq R_p differs from the exponents of {p} at row {key}")
    checks.append(f"W* = sum_p log(p) R_p verified for {len(needed)} primes")


__all__ = ["check_compatibility", "check_embeddings_rank_witness", "is_prime"]
