"""Analysis built on a cache or the weights: logit lens, direct logit attribution, head
scores, the induction test, FactoredMatrix circuits and composition scores."""

from interp.analysis.composition import all_composition_scores, composition_scores, get_comp_score
from interp.analysis.factored_matrix import FactoredMatrix
from interp.analysis.head_scores import (
    HEAD_NAMES,
    HEAD_THRESHOLD,
    attention_similarity,
    detection_pattern,
    duplicate_token_pattern,
    head_scores,
    induction_layers,
    induction_pattern,
    previous_token_pattern,
    strongest_heads,
)
from interp.analysis.induction import InductionTest, induction_test, repeated_random_tokens
from interp.analysis.labels import head_label_grid, head_labels, neuron_labels, token_label
from interp.analysis.logit_attribution import DirectLogitAttribution, direct_logit_attribution
from interp.analysis.logit_lens import LogitLens, logit_lens

__all__ = [
    "HEAD_NAMES",
    "HEAD_THRESHOLD",
    "DirectLogitAttribution",
    "FactoredMatrix",
    "InductionTest",
    "LogitLens",
    "all_composition_scores",
    "attention_similarity",
    "composition_scores",
    "detection_pattern",
    "direct_logit_attribution",
    "duplicate_token_pattern",
    "get_comp_score",
    "head_label_grid",
    "head_labels",
    "head_scores",
    "induction_layers",
    "induction_pattern",
    "induction_test",
    "logit_lens",
    "neuron_labels",
    "previous_token_pattern",
    "repeated_random_tokens",
    "strongest_heads",
    "token_label",
]
