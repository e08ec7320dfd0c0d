"""Readers and writers of instance files (``.npz``, ``.json``) and the text-corpus pipeline."""

from ntpcert.instance.io.arrays import read_json as read_json
from ntpcert.instance.io.arrays import read_npz as read_npz
from ntpcert.instance.io.arrays import write_json as write_json
from ntpcert.instance.io.arrays import write_npz as write_npz
from ntpcert.instance.io.corpus import instance_from_text as instance_from_text

__all__ = ["instance_from_text", "read_json", "read_npz", "write_json", "write_npz"]
