"""The model families interp loads from Hugging Face checkpoints: one small module each,
holding its config mapping and its tensor table (see ``base``; GPT-2's, in ``gpt2``, converts
with functions nanoGPT's loader shares). ``family_for`` picks a checkpoint's family from
its config.json.

Example:
    >>> family_for({"architectures": ["LlamaForCausalLM"]}).name
    'Llama'
"""

from __future__ import annotations

from typing import Any

from interp.loading.families.base import Family, Row, iter_tensors
from interp.loading.families.bloom import BLOOM
from interp.loading.families.gemma import GEMMA, GEMMA2, GEMMA3
from interp.loading.families.gpt2 import GPT2, Gpt2Family
from interp.loading.families.gpt_neo import GPT_NEO
from interp.loading.families.gpt_oss import GPT_OSS
from interp.loading.families.gptj import GPTJ
from interp.loading.families.llama import LLAMA, MISTRAL
from interp.loading.families.mixtral import MIXTRAL
from interp.loading.families.neox import NEOX
from interp.loading.families.olmo2 import OLMO2
from interp.loading.families.olmoe import OLMOE
from interp.loading.families.opt import OPT
from interp.loading.families.phi import PHI
from interp.loading.families.phi3 import PHI3
from interp.loading.families.qwen import QWEN2, QWEN3
from interp.loading.families.qwen2_moe import QWEN2_MOE
from interp.loading.families.qwen3_moe import QWEN3_MOE

FAMILIES = (
    GPT2, NEOX, LLAMA, MISTRAL, QWEN2, QWEN3, GEMMA, GEMMA2, GEMMA3, OPT, GPT_NEO, GPTJ, PHI, PHI3,
    OLMO2, BLOOM, MIXTRAL, QWEN2_MOE, QWEN3_MOE, OLMOE, GPT_OSS,
)  # fmt: skip
GPT2_ARCHITECTURES = GPT2.architectures
SUPPORTED_ARCHITECTURES = tuple(
    architecture for family in FAMILIES for architecture in family.architectures
)
# What the loaders use of a family: a table-driven Family, or GPT-2's adapter.
ModelFamily = Family | Gpt2Family

__all__ = [
    "FAMILIES",
    "GPT2_ARCHITECTURES",
    "SUPPORTED_ARCHITECTURES",
    "Family",
    "GPT2",
    "ModelFamily",
    "Row",
    "family_for",
    "is_gpt2",
    "iter_tensors",
]


def is_gpt2(hf_config: dict[str, Any]) -> bool:
    """Whether a config.json is GPT-2's (one without ``model_type`` is, as interp has always
    read it, unless its ``architectures`` name another family).

    Example:
        >>> is_gpt2({"model_type": "gpt2"}), is_gpt2({"model_type": "llama"})
        (True, False)
    """
    if "model_type" in hf_config:
        return hf_config["model_type"] == "gpt2"
    others = SUPPORTED_ARCHITECTURES[len(GPT2_ARCHITECTURES) :]
    return not any(name in others for name in hf_config.get("architectures") or [])


def family_for(hf_config: dict[str, Any]) -> ModelFamily:
    """The family of a config.json: GPT-2 when ``is_gpt2`` says so, else by its architecture,
    else its model type; an unsupported one is a ``ValueError`` listing the supported
    architectures.

    Example:
        >>> family_for({"model_type": "gpt2"}).name
        'GPT-2'
    """
    if is_gpt2(hf_config):
        return GPT2
    architectures = hf_config.get("architectures") or []
    if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
        raise ValueError(
            f"field 'architectures' of config.json is {architectures!r}; it must be a list of "
            'class names, e.g. ["LlamaForCausalLM"].'
        )
    for family in FAMILIES:
        if any(name in family.architectures for name in architectures):
            return family
    if not architectures:
        for family in FAMILIES:
            if hf_config.get("model_type") in family.model_types:
                return family
    described = architectures or f"model_type {hf_config.get('model_type')!r}"
    raise ValueError(
        f"This checkpoint is a {described} model, which interp cannot load. Supported "
        f"architectures: {', '.join(SUPPORTED_ARCHITECTURES)}."
    )
