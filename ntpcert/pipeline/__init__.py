"""The verdict layer: the float pipeline and the exact pipeline (the certificate and its checker are in
:mod:`ntpcert.certificate`)."""
