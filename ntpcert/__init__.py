"""ntpcert: exact certificates and implicit-bias limits for next-token prediction.

The package is layered; each layer imports only from the layers below it (``tests/test_layers.py``
enforces this with import-linter)::

    cli            the command line: parse → call the library → render
    experiments    hypothesis strategies, sweeps, the solver benchmark harness
    report         text/JSON renderings and figures
    geometry       unconstrained features: the nuclear-norm NTP-SVM on the logits
    dynamics       optimisers, trajectories, the regularisation path
    pipeline       float and exact verdicts (certify, exact_certify, explain)
    certificate    the certificate format, its writers and readers, and the independent checker
    verdict        Verdict(holds, witness): the one verdict type, with its closed set of witnesses
    solve          the separability LP, NTP-SVM backends, the structured solver, other norms
    exact          rational arithmetic and exact checks
    rows           Kesler rows, F and W*, the NTP-SVM as a QP
    instance       the data model, embeddings, readers, built-in datasets
    util           atomic output, progress bars, three-valued logic, BLAS threads
    errors         the exception hierarchy

The core functions are re-exported here, one name a line; the heavy ones load on first use so that
``import ntpcert`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ntpcert.errors import CertificateError as CertificateError
from ntpcert.errors import InfeasibleError as InfeasibleError
from ntpcert.errors import InputError as InputError
from ntpcert.errors import NTPCertError as NTPCertError
from ntpcert.errors import SolverError as SolverError
from ntpcert.instance import NTPInstance as NTPInstance
from ntpcert.instance.io import read_json as read_json
from ntpcert.instance.io import read_npz as read_npz
from ntpcert.instance.io import write_json as write_json
from ntpcert.instance.io import write_npz as write_npz
from ntpcert.instance.load import load_instance as load_instance

if TYPE_CHECKING:
    from ntpcert.pipeline.exact_verdicts import exact_certify as exact_certify
    from ntpcert.pipeline.float_verdicts import certify as certify
    from ntpcert.certificate.checker import verify as verify
    from ntpcert.solve.svm import solve_svm as solve_svm
    from ntpcert.verdict import Verdict as Verdict

__version__ = "0.1.0"

#: Public name -> module; these load on first use (PEP 562).
_LAZY = {
    "certify": "ntpcert.pipeline.float_verdicts",
    "exact_certify": "ntpcert.pipeline.exact_verdicts",
    "verify": "ntpcert.certificate.checker",
    "solve_svm": "ntpcert.solve.svm",
    "Verdict": "ntpcert.verdict",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ntpcert' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CertificateError",
    "InfeasibleError",
    "InputError",
    "NTPCertError",
    "NTPInstance",
    "SolverError",
    "Verdict",
    "certify",
    "exact_certify",
    "load_instance",
    "read_json",
    "read_npz",
    "solve_svm",
    "verify",
    "write_json",
    "write_npz",
]
