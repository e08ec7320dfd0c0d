"""The compiled epoch is loaded from numba's on-disk cache in a second process, not compiled again: defined
inside a function it referred to the block update as a closure variable, which the cache could not match,
and every process paid about 1.7 s of compilation (and grew the cache index by an entry)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import numpy as np
from ntpcert import NTPInstance
from ntpcert.rows.kesler import KeslerSystem
from ntpcert.solve.structured import compiled
from ntpcert.solve.structured.solver import solve

rng = np.random.default_rng(0)
H = rng.standard_normal((400, 16))
counts = np.zeros((400, 12))
counts[np.arange(400), (H @ rng.standard_normal((16, 12))).argmax(axis=1)] = 1
solve(KeslerSystem.build(NTPInstance.from_counts(H, counts[:, counts.sum(axis=0) > 0])), separable=True)
kernel = compiled._kernel
assert kernel is not None, "the compiled path did not run"
print(sum(kernel.stats.cache_hits.values()), sum(kernel.stats.cache_misses.values()))
"""


def _run() -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    hits, misses = (int(x) for x in out.stdout.split()[-2:])
    return hits, misses


def test_the_second_process_loads_the_compiled_epoch_from_the_cache():
    _run()  # compiles where the cache is empty (a fresh clone), loads it otherwise
    hits, misses = _run()
    assert hits >= 1 and misses == 0
