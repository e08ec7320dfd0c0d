"""Exact certificates: rational arithmetic (python-flint) on the Kesler system, compatibility with
its irrational log-odds decided exactly, separability witnesses, NTP-SVM gap bounds, certificate
files and an independent checker. See ``docs/certificates.md``.
"""

import importlib

#: Public name -> submodule. The submodules load on first use (PEP 562): the structured solver
#: needs only ``svm``, and importing ``pipeline``/``verify`` with it would cost start-up time.
_WHERE = {
    "ExactCompatibility": "compatibility",
    "WStarClosedForm": "compatibility",
    "check_compatibility_exact": "compatibility",
    "w_star_closed_form": "compatibility",
    "ExactReport": "pipeline",
    "exact_certify": "pipeline",
    "ExactSeparability": "separability",
    "check_separability_exact": "separability",
    "ExactSVMBounder": "svm",
    "SVMBound": "svm",
    "exact_svm_bound": "svm",
    "Verdict": "verify",
    "verify_certificate": "verify",
    "verify_file": "verify",
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
    "ExactCompatibility",
    "ExactReport",
    "ExactSVMBounder",
    "ExactSeparability",
    "SVMBound",
    "Verdict",
    "WStarClosedForm",
    "check_compatibility_exact",
    "check_separability_exact",
    "exact_certify",
    "exact_svm_bound",
    "verify_certificate",
    "verify_file",
    "w_star_closed_form",
]
