"""Optional dependencies: import one, or fail with one line naming the extra that installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from ntpcert.errors import MissingExtraError

#: Extra of pyproject.toml -> what it brings.
EXTRAS = {
    "strategies": "hypothesis (ntpcert.experiments.strategies)",
    "bench": "qpsolvers and its QP solvers (OSQP, SCS, PIQP, ProxQP, HiGHS), scikit-learn, qpbenchmark",
    "dist": "dask.distributed (ntpcert sweep)",
    "lm": "torch, transformers, safetensors, tokenizers (--model DIR: reading language models)",
    "tl": "transformer-lens, with lm (ntpcert.instance.lm.hooked: TransformerBridge, HookedTransformer)",
    "nnsight": "nnsight, with lm (ntpcert.instance.lm.hooked: nnsight models)",
    "datasets": "datasets (saved datasets folders of token ids)",
    "docs": "mkdocs-material and pymdown-extensions (the documentation site)",
    "test": "pytest and import-linter, with every extra above but docs (the test suite)",
}


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module``, or raise :class:`~ntpcert.errors.MissingExtraError` saying that
    ``feature`` needs it and that ``pip install 'ntpcert[extra]'`` brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(f"{feature} needs the optional package {module.split('.')[0]!r}, which is not "
                                f"installed: pip install 'ntpcert[{extra}]'") from err


__all__ = ["EXTRAS", "require"]
