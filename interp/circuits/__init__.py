"""Circuit tracing: attribution graphs through transcoders, with circuit-tracer's API.

Replace each MLP by a transcoder, freeze attention patterns and norm scales, and for one
prompt the model is linear in its residual stream: every edge of the graph (feature, error
and token nodes to features and logits) is a direct effect computed by backward passes.

Example:
    >>> import tempfile
    >>> from interp.circuits import ReplacementModel, attribute, load_transcoders, prune_graph
    >>> transcoders = load_transcoders("shakespeare-char-transcoders")
    >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", transcoders)
    >>> prompt = "ROMEO:\\nIt seems she hangs upon the chee"
    >>> graph = attribute(prompt, replacement, max_feature_nodes=32, batch_size=64)
    >>> node_mask, edge_mask, cumulative_scores = prune_graph(graph, node_threshold=0.8)
    >>> folder = tempfile.mkdtemp()
    >>> path = create_graph_files(graph, "romeo", folder)  # Neuronpedia's graph JSON
    >>> page = graph_view(graph, replacement).save(f"{folder}/romeo.html")  # offline viewer
    >>> logits, activations = replacement.feature_intervention(prompt, [(3, 5, 0, 0.0)])
    >>> loadings = head_loadings(replacement, graph, target=len(graph.adjacency_matrix) - 1)
    >>> qk = qk_attribution(replacement, graph, layer=2, head=1, query_pos=20, key_pos=7)
"""

from interp.circuits.attention import (
    AttentionAnnotations,
    HeadLoadings,
    QKAttribution,
    annotate_attention,
    head_loadings,
    qk_attribution,
)
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
    "AttentionAnnotations",
    "CrossLayerTranscoder",
    "CustomTarget",
    "Graph",
    "HeadLoadings",
    "Intervention",
    "LogitTarget",
    "PruneResult",
    "QKAttribution",
    "ReplacementModel",
    "TranscoderSet",
    "annotate_attention",
    "attribute",
    "compute_graph_scores",
    "compute_partial_influences",
    "create_graph_files",
    "ensure_tokenized",
    "feature_intervention",
    "feature_intervention_generate",
    "graph_view",
    "head_loadings",
    "list_transcoders",
    "load_cross_layer_transcoder",
    "load_transcoders",
    "prune_graph",
    "qk_attribution",
]
