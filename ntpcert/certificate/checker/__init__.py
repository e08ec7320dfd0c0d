"""The independent checker of certificates (:mod:`ntpcert.certificate.checker.api`).

It re-derives every claim of a certificate from the instance, in exact arithmetic, and imports nothing
that produced it: ``pyproject.toml`` holds an import-linter ``forbidden`` contract that keeps this
package away from ``ntpcert.solve``, ``ntpcert.rows``, ``ntpcert.pipeline``,
:mod:`ntpcert.certificate.encode` and the producing modules of ``ntpcert.exact``; the default test suite
runs it. Its parts: :mod:`~.api` (entry points and :class:`CheckResult`), :mod:`~.exact` (the instance
in integers), :mod:`~.limbs` (exact products with float64 BLAS), :mod:`~.primal` (W and a),
:mod:`~.compatibility`, :mod:`~.sections` (instance, separability, svm, claims), :mod:`~.excess`,
:mod:`~.why_not` and :mod:`~.reduction` (the frequent-token bound).
"""

from ntpcert.certificate.checker.api import INSTANCE_DATA as INSTANCE_DATA
from ntpcert.certificate.checker.api import INSTANCE_EMBEDDED as INSTANCE_EMBEDDED
from ntpcert.certificate.checker.api import INSTANCE_SOURCE_TEXT as INSTANCE_SOURCE_TEXT
from ntpcert.certificate.checker.api import CheckResult as CheckResult
from ntpcert.certificate.checker.api import verify as verify
from ntpcert.certificate.checker.api import verify_certificate as verify_certificate
from ntpcert.certificate.checker.api import verify_file as verify_file
from ntpcert.certificate.checker.api import verify_text as verify_text

__all__ = ["INSTANCE_DATA", "INSTANCE_EMBEDDED", "INSTANCE_SOURCE_TEXT", "CheckResult", "verify", "verify_certificate",
           "verify_file", "verify_text"]
