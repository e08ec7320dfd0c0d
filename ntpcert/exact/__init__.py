"""Exact certificates: rational arithmetic (python-flint) on the Kesler system, compatibility with
its irrational log-odds decided exactly, separability witnesses, NTP-SVM gap bounds, certificate
files and an independent checker. See ``docs/certificates.md``.
"""

from .compatibility import ExactCompatibility as ExactCompatibility
from .compatibility import WStarClosedForm as WStarClosedForm
from .compatibility import check_compatibility_exact as check_compatibility_exact
from .compatibility import w_star_closed_form as w_star_closed_form
from .pipeline import ExactReport as ExactReport
from .pipeline import exact_certify as exact_certify
from .separability import ExactSeparability as ExactSeparability
from .separability import check_separability_exact as check_separability_exact
from .svm import ExactSVMBounder as ExactSVMBounder
from .svm import SVMBound as SVMBound
from .svm import exact_svm_bound as exact_svm_bound
from .verify import Verdict as Verdict
from .verify import verify_certificate as verify_certificate
from .verify import verify_file as verify_file

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
