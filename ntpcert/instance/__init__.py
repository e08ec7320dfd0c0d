"""The data layer: the instance model, embeddings, readers and writers, built-in datasets.

Everything above this layer sees data only as a validated, frozen :class:`NTPInstance`;
:func:`ntpcert.instance.load.load_instance` turns any DATA argument into one.
"""

from ntpcert.instance.model import NTPInstance as NTPInstance

__all__ = ["NTPInstance"]
