"""The structured NTP-SVM solver (see :mod:`ntpcert.solve.structured.solver`)."""
