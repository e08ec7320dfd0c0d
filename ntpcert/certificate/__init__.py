"""Certificates: the format, its strict text, the writers, the readers and the independent checker.

* :mod:`~ntpcert.certificate.format`: the layout (the format's written statement), ``FORMAT``,
  ``VERSION`` and the limits a reader enforces;
* :mod:`~ntpcert.certificate.schema` (the layout as a table, canonical rationals) and
  :mod:`~ntpcert.certificate.structure` (``check_schema``: a parsed certificate against that table);
  :mod:`~ntpcert.certificate.provenance` (the optional ``source`` section);
* :mod:`~ntpcert.certificate.jsonio`: strict parsing, canonical JSON, the checksum and the seal, files;
* :mod:`~ntpcert.certificate.encode` (the writers, and the whole body: ``build_certificate``) and
  :mod:`~ntpcert.certificate.decode` (the readers of the same values);
* :mod:`ntpcert.certificate.checker`: the independent checker, which never imports the encoders nor
  anything that produced a certificate (an import-linter contract).

The package imports nothing at import time; import the module you use.
"""
