"""The certificate's optional ``source`` section: where the instance was read from, by SHA-256.

An instance read from a model (:mod:`ntpcert.instance.lm`) carries::

    "source": {"kind": "model", "files": [[NAME, SHA256], ...], "corpus_sha256": SHA256,
               "context": "tokens:K" | "prefix:T", "bos": bool, "embeddings": "model" | "static" | "activations",
               "corpus": "token_ids" | "counts",
               "vocabulary": {"V": V, "V_reduced": V', "observed": ..., "merged": ..., "representative": id},
               "reader": {"library": ..., "version": ..., "class": ..., "hook": ..., "processing": {FLAG: bool | null},
                          "attention": ...}}

``corpus`` (optional) says what ``corpus_sha256`` hashes: absent, the corpus text's UTF-8 bytes;
``"token_ids"``, token ids in the canonical form of :mod:`ntpcert.instance.lm.token_ids`; ``"counts"``,
the contexts and next-token counts of an activations file (``embeddings`` ``"activations"``, ``files``
the activations file; :mod:`ntpcert.instance.lm.activations`).

``vocabulary`` (optional) says that the embedded instance keeps only the observed next tokens and one
representative of the ``merged`` unseen ones (:mod:`ntpcert.instance.lm.merge`: compatibility and
separability of the embedded instance are those of the model's full vocabulary of V tokens).
``reader`` (optional) says that the model was read through a library's Python API
(:mod:`ntpcert.instance.lm.hooked`): which library and version, the model's class, the hook point h was
read at, the weight processing in force (each flag true, false, or null where the library keeps no
record of it) and, optionally, the attention implementation; ``files`` then names ``state_dict`` and
``tokenizer.json`` by the SHA-256 of the tensors and of the tokenizer's serialisation.

The section is covered by the checksum and checked for its shape here; it is provenance, not a
claim: the verdicts are re-derived from the embedded instance alone, and anyone holding the model
files can compare their hashes with ``files``.
"""

from __future__ import annotations

import re
from typing import Any

from ntpcert.errors import CertificateError

__all__ = ["READER_SCHEMA", "SOURCE_SCHEMA", "check_source"]

#: The keys of the section, with the kinds of :data:`ntpcert.certificate.schema.SCHEMA`.
SOURCE_SCHEMA = {"kind": "str", "files": "list", "corpus_sha256": "sha256", "context": "str", "bos": "bool",
                 "embeddings": "str", "corpus?": "str", "vocabulary?": "object",
                 "reader?": "object"}

#: ``embeddings``: captured by the model, the static input embeddings, or read from an activations file.
EMBEDDINGS = ("model", "static", "activations")

#: ``corpus`` (absent: a UTF-8 text, hashed as its bytes): token ids (``--token-ids``, hashed in the canonical
#: form of :mod:`ntpcert.instance.lm.token_ids`) or an activations file's counts
#: (:mod:`ntpcert.instance.lm.activations`).
CORPUS_FORMS = ("token_ids", "counts")

#: The keys of ``source.vocabulary`` and their kinds.
VOCABULARY_SCHEMA = {"V": "size", "V_reduced": "size", "observed": "size", "merged": "int",
                     "representative": "int|null"}

#: The keys of ``source.reader`` and their kinds.
READER_SCHEMA = {"library": "str", "version": "str", "class": "str", "hook": "str", "processing": "object",
                 "attention?": "str", "forward?": "str", "forward_note?": "str", "bridge_gap?": "float"}

_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_source(sec: Any) -> None:
    """Check the values of a ``source`` section whose keys and kinds
    :func:`ntpcert.certificate.structure.check_schema` checked already: ``kind`` and ``embeddings``
    known words, each ``files`` entry a pair of a non-empty name and a SHA-256."""
    if sec["kind"] != "model":
        raise CertificateError(f"source.kind: {show(sec['kind'])}, expected 'model'")
    if sec["embeddings"] not in EMBEDDINGS:
        raise CertificateError(f"source.embeddings: {show(sec['embeddings'])}, expected one of "
                               f"{', '.join(map(repr, EMBEDDINGS))}")
    if "corpus" in sec and sec["corpus"] not in CORPUS_FORMS:
        raise CertificateError(f"source.corpus: {show(sec['corpus'])}, expected one of "
                               f"{', '.join(map(repr, CORPUS_FORMS))} (absent: a text)")
    if not sec["files"]:
        raise CertificateError("source.files: empty, expected the model's files")
    for i, item in enumerate(sec["files"]):
        ok = (type(item) is list and len(item) == 2 and type(item[0]) is str and item[0]
              and type(item[1]) is str and _SHA256.fullmatch(item[1]) is not None)
        if not ok:
            raise CertificateError(f"source.files[{i}]: expected [name, 64 lowercase hex digits], got {show(item)}")
    if "vocabulary" in sec:
        _check_vocabulary(sec["vocabulary"])
    if "reader" in sec:
        for flag, value in sec["reader"]["processing"].items():
            if value is not None and type(value) is not bool:
                raise CertificateError(f"source.reader.processing.{flag}: {show(value)}, expected true, false or null")


def _check_vocabulary(voc: dict) -> None:
    """The values of ``source.vocabulary``, whose keys and kinds the schema table checked already
    (:func:`ntpcert.certificate.structure.check_source_section`): the counts add up, and the representative
    is a token id exactly when some tokens are merged."""
    merged, rep = voc["merged"], voc["representative"]
    if voc["observed"] + merged != voc["V"] or voc["V_reduced"] != voc["observed"] + (1 if merged else 0):
        raise CertificateError(f"source.vocabulary: observed {voc['observed']} + merged {merged} is not V = "
                               f"{voc['V']}, or V_reduced {voc['V_reduced']} is not observed + (1 if merged)")
    if (rep is None) != (merged == 0) or (rep is not None and rep >= voc["V"]):
        raise CertificateError(f"source.vocabulary.representative: {show(rep)} with {merged} merged tokens of V = "
                               f"{voc['V']} (a token id below V exactly when some are merged)")
