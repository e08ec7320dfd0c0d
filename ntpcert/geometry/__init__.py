"""The unconstrained-features model (W and H both trained): the nuclear-norm NTP-SVM on the logits
L = W Hᵀ, its certified solutions, and the geometry of word and context embeddings read off it."""

from ntpcert.geometry.certificate import NuclearSVMSolution as NuclearSVMSolution
from ntpcert.geometry.pattern import SupportPattern as SupportPattern

__all__ = ["NuclearSVMSolution", "SupportPattern"]
