"""ntpcert: exact certificates and implicit-bias limits for next-token prediction.

See ``docs/`` and the README for a tour. The public API is re-exported here, one name a line.
"""

from ntpcert.errors import CertificateError as CertificateError
from ntpcert.errors import InfeasibleError as InfeasibleError
from ntpcert.errors import InputError as InputError
from ntpcert.errors import NTPCertError as NTPCertError
from ntpcert.errors import SolverError as SolverError
from ntpcert.instance import NTPInstance as NTPInstance
from ntpcert.io import load_instance as load_instance
from ntpcert.io import read_json as read_json
from ntpcert.io import read_npz as read_npz
from ntpcert.io import write_json as write_json
from ntpcert.io import write_npz as write_npz

__version__ = "0.1.0"
