"""The verdict layer: the float pipeline, the exact pipeline, the certificate file and its checker."""
