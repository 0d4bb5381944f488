"""MXFP4 dequantization, which lives in ``interp.components.mxfp4`` (the experts kept in MXFP4
dequantize in their forward); re-exported here for the loaders and older imports."""

from interp.components.mxfp4 import (
    FP4_VALUES,
    SCALE_BIAS,
    VALUES_PER_BLOCK,
    check_mxfp4_shapes,
    dequantize_mxfp4,
    dequantized_shape,
)

__all__ = [
    "FP4_VALUES",
    "SCALE_BIAS",
    "VALUES_PER_BLOCK",
    "check_mxfp4_shapes",
    "dequantize_mxfp4",
    "dequantized_shape",
]
