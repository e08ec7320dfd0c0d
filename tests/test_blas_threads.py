"""``blas_threads`` limits every BLAS loaded by the time it is entered, scipy's included."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json
import numpy
from threadpoolctl import ThreadpoolController
from ntpcert.util.numbers import blas_threads
with blas_threads(1):  # before scipy: only numpy's BLAS is loaded
    pass
import scipy.linalg  # loads scipy's own OpenBLAS
scipy.linalg.lu_factor(numpy.eye(4))
with blas_threads(1):
    inside = [(lib["filepath"], lib["num_threads"]) for lib in ThreadpoolController().info() if lib["user_api"] == "blas"]
print(json.dumps(inside))
"""


def test_blas_loaded_after_the_first_call_is_limited_too():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout
    inside = json.loads(out)
    assert inside and all(n == 1 for _, n in inside), inside
