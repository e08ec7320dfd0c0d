"""The softmax bottleneck, exactly: which tokens a fixed decoder (W, b) with d < V can make the unique
argmax for some h, each verdict with an exact witness (a rational h, or a convex combination of other
rows), and the independent re-check of a certificate of them (docs/bottleneck.md)."""

from ntpcert.geometry.bottleneck.check import BottleneckCheck, check_bottleneck_certificate, read_certificate
from ntpcert.geometry.bottleneck.decide import argmaxability
from ntpcert.geometry.bottleneck.result import BottleneckResult

__all__ = ["BottleneckCheck", "BottleneckResult", "argmaxability", "check_bottleneck_certificate",
           "read_certificate"]
