"""ntpcert: exact certificates and implicit-bias limits for next-token prediction.

See ``docs/`` and the README for a tour. The public API is re-exported here, one name a line.
"""

from .errors import CertificateError as CertificateError
from .errors import InfeasibleError as InfeasibleError
from .errors import InputError as InputError
from .errors import NTPCertError as NTPCertError
from .errors import SolverError as SolverError
from .instance import NTPInstance as NTPInstance
from .io import load_instance as load_instance
from .io import read_json as read_json
from .io import read_npz as read_npz
from .io import write_json as write_json
from .io import write_npz as write_npz

__version__ = "0.1.0"
