"""TransformerLens's ``transformer_lens.head_detector`` (head detection), for scripts ported
by import; the code lives in ``interp.analysis.head_detector``.

Example:
    >>> from interp.head_detector import detect_head
"""

from interp.analysis.head_detector import (
    HEAD_NAMES,
    detect_head,
    get_duplicate_token_head_detection_pattern,
    get_induction_head_detection_pattern,
    get_previous_token_head_detection_pattern,
)

__all__ = [
    "HEAD_NAMES",
    "detect_head",
    "get_duplicate_token_head_detection_pattern",
    "get_induction_head_detection_pattern",
    "get_previous_token_head_detection_pattern",
]
