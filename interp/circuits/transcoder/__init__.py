"""circuit-tracer's ``circuit_tracer.transcoder`` package: its transcoder classes and
loaders under its module paths (``single_layer_transcoder``, ``cross_layer_transcoder``,
``activation_functions``). ``TranscoderSet`` and ``CrossLayerTranscoder`` are interp's.

Example:
    >>> from interp.circuits.transcoder import SingleLayerTranscoder, TranscoderSet
"""

from interp.circuits.transcoder.activation_functions import JumpReLU, TopK
from interp.circuits.transcoder.cross_layer_transcoder import CrossLayerTranscoder, load_clt
from interp.circuits.transcoder.single_layer_transcoder import (
    SingleLayerTranscoder,
    TranscoderSet,
    load_relu_transcoder,
    load_transcoder,
    load_transcoder_set,
)

__all__ = [
    "CrossLayerTranscoder",
    "JumpReLU",
    "SingleLayerTranscoder",
    "TopK",
    "TranscoderSet",
    "load_clt",
    "load_relu_transcoder",
    "load_transcoder",
    "load_transcoder_set",
]
