"""Exact certificates: rational arithmetic (python-flint) on the Kesler system, compatibility with
its irrational log-odds decided exactly, separability witnesses, NTP-SVM gap bounds, certificate
files and an independent checker.

Submodules are imported on use; see :mod:`ntpcert.exact.svm` for :func:`exact_svm_bound`.
"""
