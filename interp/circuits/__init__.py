"""Circuit tracing: attribution graphs through transcoders, with circuit-tracer's API.

Replace each MLP by a transcoder, freeze attention patterns and norm scales, and for one
prompt the model is linear in its residual stream: every edge of the graph (feature, error
and token nodes to features and logits) is a direct effect computed by backward passes.

Example:
    >>> from interp.circuits import ReplacementModel, attribute, load_transcoders, prune_graph
    >>> replacement = ReplacementModel.from_model(model, load_transcoders("tc_folder"))
    >>> graph = attribute("The capital of France is", replacement, max_feature_nodes=500)
    >>> node_mask, edge_mask, cumulative_scores = prune_graph(graph, node_threshold=0.8)
    >>> create_graph_files(graph, "capital", "graphs/")  # Neuronpedia's graph JSON
    >>> graph_view(graph, replacement).save("capital.html")  # the offline graph viewer
    >>> logits, activations = replacement.feature_intervention(tokens, [(3, 5, 1234, 0.0)])
"""

from interp.circuits.attribution import CustomTarget, attribute, ensure_tokenized
from interp.circuits.cross_layer import CrossLayerTranscoder, load_cross_layer_transcoder
from interp.circuits.graph import (
    Graph,
    LogitTarget,
    PruneResult,
    compute_graph_scores,
    compute_partial_influences,
    prune_graph,
)
from interp.circuits.graph_files import create_graph_files
from interp.circuits.intervention import (
    Intervention,
    feature_intervention,
    feature_intervention_generate,
)
from interp.circuits.replacement_model import ReplacementModel
from interp.circuits.transcoders import TranscoderSet, list_transcoders, load_transcoders
from interp.circuits.view import graph_view

__all__ = [
    "CrossLayerTranscoder",
    "CustomTarget",
    "Graph",
    "Intervention",
    "LogitTarget",
    "PruneResult",
    "ReplacementModel",
    "TranscoderSet",
    "attribute",
    "compute_graph_scores",
    "compute_partial_influences",
    "create_graph_files",
    "ensure_tokenized",
    "feature_intervention",
    "feature_intervention_generate",
    "graph_view",
    "list_transcoders",
    "load_cross_layer_transcoder",
    "load_transcoders",
    "prune_graph",
]
