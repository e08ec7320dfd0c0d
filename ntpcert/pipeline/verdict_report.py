"""The JSON object and the text lines of a certificate check (``ntpcert verify``), built from a
:class:`~ntpcert.certificate.checker.CheckResult` in the library so that the command only renders them."""

from __future__ import annotations

from typing import Any


def verdict_json(verdict, certificate: str, data: str | None) -> dict[str, Any]:
    """``certificate`` (the CERT path), ``valid``, ``too_large`` (refused for a size limit, unchecked),
    ``reason``, ``instance_source``, ``data`` (the DATA argument or null), ``checks``, ``claims`` and
    ``seconds``."""
    return {"certificate": certificate, "valid": verdict.valid, "too_large": verdict.too_large,
            "reason": verdict.reason,
            "instance_source": verdict.instance_source, "data": data, "checks": list(verdict.checks),
            "claims": verdict.claims, "seconds": verdict.seconds}


def verdict_lines(verdict, certificate: str, data: str | None) -> list[str]:
    """``VALID: CERT`` and the checks that passed, ``INVALID: reason``, or ``TOO LARGE: reason`` (over a
    size limit of the format, so not checked); the second line always says which instance the certificate
    was checked against."""
    against = f"  against: {verdict.against}" + (f" ({data})" if data is not None else "")
    if verdict.valid:
        return [f"VALID: {certificate}", against] + [f"  ok  {line}" for line in verdict.checks]
    if verdict.too_large:
        return [f"TOO LARGE: {verdict.reason} (too large to check here; not a verdict on its claims)", against]
    return [f"INVALID: {verdict.reason}", against]
