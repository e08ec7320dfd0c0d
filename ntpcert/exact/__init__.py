"""Exact arithmetic: rationals (python-flint) on the Kesler system, compatibility with its
irrational log-odds decided exactly, separability witnesses, and the exact NTP-SVM gap bound.
The certificate file and its independent checker sit a layer up, in :mod:`ntpcert.pipeline`.
See ``docs/certificates.md``.
"""

import importlib

#: Public name -> submodule. The submodules load on first use (PEP 562): the structured solver
#: needs only ``svm_gap``, and importing the rest with it would cost start-up time.
_WHERE = {
    "ExactNullSpace": "compatibility",
    "WStarClosedForm": "compatibility",
    "exact_null_space": "compatibility",
    "w_star_closed_form": "compatibility",
    "ExactPoint": "separability",
    "farkas_ray_lp": "separability",
    "ExactSVMBounder": "svm_gap",
    "SVMBound": "svm_gap",
    "exact_svm_bound": "svm_gap",
}


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "ExactNullSpace",
    "ExactPoint",
    "ExactSVMBounder",
    "SVMBound",
    "WStarClosedForm",
    "exact_null_space",
    "farkas_ray_lp",
    "exact_svm_bound",
    "w_star_closed_form",
]
