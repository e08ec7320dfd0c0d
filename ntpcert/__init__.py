"""ntpcert: exact certificates and implicit-bias limits for next-token prediction.

See ``docs/`` and the README for a tour. The public API is re-exported here, one name a line.
"""

from .errors import CertificateError as CertificateError
from .errors import InfeasibleError as InfeasibleError
from .errors import InputError as InputError
from .errors import NTPCertError as NTPCertError
from .errors import SolverError as SolverError
from .instance import NTPInstance as NTPInstance

__version__ = "0.1.0"
