"""Instances read from language models on disk: last-layer h_j as the decoder sees them, and the decoder.

* :mod:`~ntpcert.instance.lm.files`: a model directory's files, named by SHA-256;
* :mod:`~ntpcert.instance.lm.contexts`: distinct contexts and exact next-token counts;
* :mod:`~ntpcert.instance.lm.capture`: the decoder's input by a forward hook (``ntpcert[lm]``);
* :mod:`~ntpcert.instance.lm.static`: the torch-free path from the safetensors alone;
* :mod:`~ntpcert.instance.lm.load`: :func:`load_model_data`, all of it together;
* :mod:`~ntpcert.instance.lm.token_ids`: a corpus given as token ids (``--token-ids``);
* :mod:`~ntpcert.instance.lm.activations`: an activations file, the h without the model
  (:func:`read_activations`, :func:`write_activations`).
* :mod:`~ntpcert.instance.lm.hooked`: the same from a model held in memory by TransformerLens
  (:func:`from_transformer_bridge`, :func:`from_hooked_transformer`, ``ntpcert[tl]``) or nnsight
  (:func:`from_nnsight`, ``ntpcert[nnsight]``).

Importing this package imports neither torch nor transformers (nor transformer_lens, nor nnsight); they
load when a model is read.
"""

from ntpcert.instance.lm.contexts import ContextSpec
from ntpcert.instance.lm.activations import read_activations, write_activations
from ntpcert.instance.lm.hooked import HookedModelData, from_hooked_transformer, from_nnsight, from_transformer_bridge
from ntpcert.instance.lm.load import ModelData, load_model_data

__all__ = ["ContextSpec", "HookedModelData", "ModelData", "from_hooked_transformer", "from_nnsight",
           "from_transformer_bridge", "load_model_data", "read_activations", "write_activations"]
