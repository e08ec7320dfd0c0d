"""The constraint layer: Kesler rows of an instance, the subspace F with W*, and the NTP-SVM as a QP."""
