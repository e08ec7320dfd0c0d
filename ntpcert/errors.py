"""Exceptions raised by ntpcert.

Every error the package raises on purpose derives from :class:`NTPCertError`, so callers
can catch the package's failures without catching programming errors.
"""

from __future__ import annotations


class NTPCertError(Exception):
    """Base class of all ntpcert errors."""


class InputError(NTPCertError, ValueError):
    """Bad input: a wrong shape, a non-finite value, a negative count, an empty support,
    an unreadable file or an unknown name. The message names the field and the value."""


class SolverError(NTPCertError, RuntimeError):
    """A numerical backend failed or returned a status that does not answer the question."""


class CertificateError(NTPCertError):
    """A certificate is malformed, or does not speak of the instance it is checked against."""


class CertificateTooLarge(CertificateError):
    """A certificate is over a size limit of the format (:data:`ntpcert.certificate.format.LIMITS`): too
    large to check here, which says nothing about whether its claims hold. ``ntpcert verify`` reports it
    as ``TOO LARGE`` with its own exit status, never as ``INVALID``."""


class ExactArithmeticError(NTPCertError, ValueError):
    """An exact computation cannot proceed: values out of the representable range, a number too
    large to factorise, or an exact system that contradicts a float answer it was built from."""


class InfeasibleError(SolverError):
    """The NTP-SVM has no feasible point: the data are not NTP-separable (as the solver sees it;
    ``ntpcert certify --exact`` proves it)."""


class MissingExtraError(NTPCertError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it
    (``pip install 'ntpcert[EXTRA]'``)."""


class BudgetSpent(SolverError):
    """An engine spent its budget of work (epochs, iterations, ...) before it settled the question: the
    same input stops at the same point on every machine (:mod:`ntpcert.util.budget`). ``spent`` is the
    budget, ``units`` what it counts."""

    def __init__(self, message: str, *, spent: int = 0, units: str = "") -> None:
        super().__init__(message)
        self.spent = spent
        self.units = units


class TimeLimitReached(SolverError):
    """A user's wall-clock cap (``time_limit=``, ``--time-limit``; off by default) ended an engine's run
    first: the result belongs to this run on this machine, not to the data. ``seconds`` is the cap."""

    def __init__(self, message: str, *, seconds: float = 0.0) -> None:
        super().__init__(message)
        self.seconds = seconds
