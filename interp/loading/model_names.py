"""TransformerLens 2.18's model names for the families interp loads: each official name (a hub
repo id) with its aliases, as TL's ``OFFICIAL_MODEL_NAMES`` and ``MODEL_ALIASES`` list them
(tests/loading/test_loading_from_pretrained.py checks them against TL's own table).

Example:
    >>> get_official_model_name("attn-only-2l")
    'NeelNanda/Attn_Only_2L512W_C4_Code'
"""

from __future__ import annotations

# Pythia's sizes, with the names its models had before their parameter counts were corrected.
_PYTHIA_SIZES = {
    "14m": [],
    "31m": [],
    "70m": ["19m"],
    "160m": ["125m"],
    "410m": ["350m"],
    "1b": ["800m"],
    "1.4b": ["1.3b"],
    "2.8b": ["2.7b"],
    "6.9b": ["6.7b"],
    "12b": ["13b"],
}


def _pythia_aliases() -> dict[str, list[str]]:
    """Each Pythia size plain, deduped, and as the v0 re-release, with ``pythia-SIZE`` and the
    old sizes' names as aliases (14m and 31m exist plain only)."""
    table = {}
    for size, old_sizes in _PYTHIA_SIZES.items():
        for suffix in ["", "-deduped", "-v0", "-deduped-v0"] if old_sizes else [""]:
            names = [f"pythia-{size}{suffix}"]
            for old in old_sizes:
                names += [f"EleutherAI/pythia-{old}{suffix}", f"pythia-{old}{suffix}"]
            table[f"EleutherAI/pythia-{size}{suffix}"] = names
    table["EleutherAI/pythia-70m"].insert(1, "pythia")
    table["EleutherAI/pythia-70m-v0"].insert(1, "pythia-v0")
    for seed in (1, 2, 3):
        table[f"EleutherAI/pythia-160m-seed{seed}"] = [
            f"pythia-160m-seed{seed}",
            f"EleutherAI/pythia-125m-seed{seed}",
            f"pythia-125m-seed{seed}",
        ]
    return table


def _toy_aliases() -> dict[str, list[str]]:
    """Neel Nanda's TransformerLens-format toy models (``solu-1l``, ``gelu-2l``,
    ``attn-only-4l``, ...): the C4+code models as ``<kind>-<n>l``, ``-new`` and ``-c4-code``,
    the old Pile SoLU models as ``solu-<n>l-pile`` and ``-old``."""
    table = {}
    for layers, version in [(1, 9), (2, 10), (4, 11), (6, 13), (8, 21), (10, 22), (12, 23)]:
        table[f"NeelNanda/SoLU_{layers}L_v{version}_old"] = [
            f"solu-{layers}l-pile",
            f"solu-{layers}l-old",
        ]
    repos = [("SoLU", "solu", layers, 512) for layers in (1, 2, 3, 4)]
    repos += [("SoLU", "solu", 6, 768), ("SoLU", "solu", 8, 1024), ("SoLU", "solu", 10, 1280)]
    repos += [("SoLU", "solu", 12, 1536)]
    repos += [(kind, alias, layers, 512) for kind, alias in [("GELU", "gelu"),
              ("Attn_Only", "attn-only")] for layers in (1, 2, 3, 4)]  # fmt: skip
    for kind, alias, layers, width in repos:
        name = f"{alias}-{layers}l"
        table[f"NeelNanda/{kind}_{layers}L{width}W_C4_Code"] = [
            name,
            f"{name}-new",
            f"{name}-c4-code",
        ]
    table["NeelNanda/Attn-Only-2L512W-Shortformer-6B-big-lr"] = [
        "attn-only-2l-demo",
        "attn-only-2l-shortformer-6b-big-lr",
        "attn-only-2l-induction-demo",
        "attn-only-demo",
    ]
    for layers in (1, 4):
        table[f"NeelNanda/SoLU_{layers}L512W_Wiki_Finetune"] = [
            f"solu-{layers}l-wiki",
            f"solu-{layers}l-wiki-finetune",
            f"solu-{layers}l-finetune",
        ]
    table["ArthurConmy/redwood_attn_2l"] = ["redwood_attn_2l"]
    return table


def _lowercase_aliases(hub_ids: list[str]) -> dict[str, list[str]]:
    """Hub ids whose TransformerLens alias is the lower-cased name after the owner."""
    return {hub_id: [hub_id.split("/")[1].lower()] for hub_id in hub_ids}


_QWEN_IDS = [
    f"Qwen/Qwen1.5-{size}{variant}"
    for size in ["0.5B", "1.8B", "4B", "7B", "14B"]
    for variant in ["", "-Chat"]
] + [
    f"Qwen/Qwen{version}-{size}{variant}"
    for version, sizes in [
        ("2", ["0.5B", "1.5B", "7B"]),
        ("2.5", ["0.5B", "1.5B", "3B", "7B", "14B", "32B", "72B"]),
    ]
    for size in sizes
    for variant in ["", "-Instruct"]
]
_QWEN3_IDS = [
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-0.6B-Base",
    "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B",
]
_GEMMA_IDS = [
    f"google/gemma-2-{size}{variant}" for size in ("2b", "9b", "27b") for variant in ("", "-it")
] + [
    f"google/gemma-3-{size}{variant}"
    for size, variants in [
        ("270m", ("", "-it")),
        ("1b", ("-pt", "-it")),
        ("4b", ("-pt", "-it")),
        ("12b", ("-pt", "-it")),
        ("27b", ("-pt", "-it")),
    ]
    for variant in variants
]
# Llama 2 and CodeLlama: TL's aliases are the name without the owner, and the hub id itself.
_LLAMA_2 = {
    "meta-llama/Llama-2-7b-hf": ["Llama-2-7b", "meta-llama/Llama-2-7b-hf"],
    "meta-llama/Llama-2-7b-chat-hf": ["Llama-2-7b-chat", "meta-llama/Llama-2-7b-chat-hf"],
    "meta-llama/Llama-2-13b-hf": ["Llama-2-13b", "meta-llama/Llama-2-13b-hf"],
    "meta-llama/Llama-2-13b-chat-hf": ["Llama-2-13b-chat", "meta-llama/Llama-2-13b-chat-hf"],
    "meta-llama/Llama-2-70b-chat-hf": ["Llama-2-70b-chat", "meta-llama-2-70b-chat-hf"],
    "codellama/CodeLlama-7b-hf": ["CodeLlamallama-2-7b", "codellama/CodeLlama-7b-hf"],
    "codellama/CodeLlama-7b-Python-hf": [
        "CodeLlama-7b-python",
        "codellama/CodeLlama-7b-Python-hf",
    ],
    "codellama/CodeLlama-7b-Instruct-hf": [
        "CodeLlama-7b-instruct",
        "codellama/CodeLlama-7b-Instruct-hf",
    ],
}
# Llama 3 has no TransformerLens alias: its hub ids are its names (matched ignoring case).
_LLAMA_3_IDS = [
    f"meta-llama/{name}"
    for name in [
        "Meta-Llama-3-8B",
        "Meta-Llama-3-8B-Instruct",
        "Meta-Llama-3-70B",
        "Meta-Llama-3-70B-Instruct",
        "Llama-3.1-70B",
        "Llama-3.1-8B",
        "Llama-3.1-8B-Instruct",
        "Llama-3.1-70B-Instruct",
        "Llama-3.2-1B",
        "Llama-3.2-3B",
        "Llama-3.2-1B-Instruct",
        "Llama-3.2-3B-Instruct",
        "Llama-3.3-70B-Instruct",
    ]
]

_OPT_ALIASES = {
    f"facebook/opt-{size}": [f"opt-{size}", *names]
    for size, names in [
        ("125m", ["opt-small", "opt"]),
        ("1.3b", ["opt-medium"]),
        ("2.7b", ["opt-large"]),
        ("6.7b", ["opt-xl"]),
        ("13b", ["opt-xxl"]),
        ("30b", ["opt-xxxl"]),
        ("66b", ["opt-xxxxl"]),
    ]
}
_GPT_NEO_ALIASES = {
    "EleutherAI/gpt-neo-125M": ["gpt-neo-125M", "gpt-neo-small", "neo-small", "neo"],
    "EleutherAI/gpt-neo-1.3B": ["gpt-neo-1.3B", "gpt-neo-medium", "neo-medium"],
    "EleutherAI/gpt-neo-2.7B": ["gpt-neo-2.7B", "gpt-neo-large", "neo-large"],
}
# The TinyStories models (GPT-Neo's architecture): TL's alias is tiny-stories-<the rest>.
_TINY_STORIES = {
    f"roneneldan/TinyStories-{name}": [f"tiny-stories-{alias}"]
    for name, alias in [
        *((size, size) for size in ("1M", "3M", "8M", "28M", "33M")),
        *((f"Instruct-{size}", f"instruct-{size}") for size in ("1M", "3M", "8M", "28M", "33M")),
        ("1Layer-21M", "1L-21M"),
        ("2Layers-33M", "2L-33M"),
        ("Instuct-1Layer-21M", "instruct-1L-21M"),  # sic: the hub repo's spelling
        ("Instruct-2Layers-33M", "instruct-2L-33M"),
    ]
}
_PHI_IDS = ["microsoft/phi-1", "microsoft/phi-1_5", "microsoft/phi-2"]
_GEMMA_1_IDS = ["google/gemma-2b", "google/gemma-7b", "google/gemma-2b-it", "google/gemma-7b-it"]

# TransformerLens's official names of the supported families (hub ids) and their aliases.
MODEL_ALIASES: dict[str, list[str]] = {
    "gpt2": ["gpt2-small"],
    "gpt2-medium": [],
    "gpt2-large": [],
    "gpt2-xl": [],
    "distilgpt2": ["distillgpt2", "distill-gpt2", "distil-gpt2", "gpt2-xs"],
    "EleutherAI/gpt-neox-20b": ["gpt-neox-20b", "gpt-neox", "neox"],
    **_pythia_aliases(),
    **_toy_aliases(),
    **_LLAMA_2,
    **{hub_id: [] for hub_id in _LLAMA_3_IDS},
    "mistralai/Mistral-7B-v0.1": ["mistral-7b"],
    "mistralai/Mistral-7B-Instruct-v0.1": ["mistral-7b-instruct"],
    "mistralai/Mistral-Small-24B-Base-2501": [],
    "mistralai/Mistral-Nemo-Base-2407": ["mistral-nemo-base-2407"],
    "mistralai/Mixtral-8x7B-v0.1": ["mixtral", "mixtral-8x7b"],
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ["mixtral-instruct", "mixtral-8x7b-instruct"],
    **_lowercase_aliases(_QWEN_IDS),
    "Qwen/QwQ-32B-Preview": ["qwen-32b-preview"],
    **_lowercase_aliases(_QWEN3_IDS),
    **_lowercase_aliases(_GEMMA_IDS),
    **_OPT_ALIASES,
    **_GPT_NEO_ALIASES,
    "EleutherAI/gpt-j-6B": ["gpt-j-6B", "gpt-j", "gptj"],
    **_TINY_STORIES,
    **_lowercase_aliases(_PHI_IDS),
    "microsoft/Phi-3-mini-4k-instruct": ["phi-3"],
    "microsoft/phi-4": ["phi-4"],
    **{
        f"bigscience/bloom-{size}": [f"bloom-{size}"]
        for size in ("560m", "1b1", "1b7", "3b", "7b1")
    },
    **_lowercase_aliases(_GEMMA_1_IDS),
    "openai/gpt-oss-20b": ["gpt-oss-20b", "gpt-oss"],
}
OFFICIAL_MODEL_NAMES: list[str] = list(MODEL_ALIASES)
# The first alias of each name (the name itself when it has none), as TL's.
DEFAULT_MODEL_ALIASES: list[str] = [
    (MODEL_ALIASES[name] or [name])[0] for name in OFFICIAL_MODEL_NAMES
]
# Repos in TransformerLens's own format (a state dict .pth and TL's config.json), not HF's.
TRANSFORMER_LENS_FORMAT_OWNERS = ("NeelNanda/", "ArthurConmy/")


def make_model_alias_map() -> dict[str, str]:
    """Every official name and alias, lower-cased, to its official name (as TL's)."""
    return {
        name.lower(): official
        for official, aliases in MODEL_ALIASES.items()
        for name in [*aliases, official]
    }


_ALIAS_TO_OFFICIAL = make_model_alias_map()


def get_official_model_name(model_name: str) -> str:
    """The hub id of a TransformerLens model name or alias (case-insensitive), as TL's; a
    ``ValueError`` listing the official names for any other name.

    Example:
        >>> get_official_model_name("gpt2-small")
        'gpt2'
    """
    official = _ALIAS_TO_OFFICIAL.get(model_name.lower())
    if official is None:
        raise ValueError(
            f"{model_name} not found. Valid official model names (excl aliases): "
            f"{OFFICIAL_MODEL_NAMES}"
        )
    return official


def hub_repo_id(name: str) -> str:
    """The hub repo of ``name``: its official name when it is a TransformerLens name or
    alias, else ``name`` itself (any hub id loads)."""
    return _ALIAS_TO_OFFICIAL.get(name.lower(), name)


def is_transformer_lens_repo(repo_id: str) -> bool:
    """Whether a hub repo holds a TransformerLens-format checkpoint (the toy models)."""
    return repo_id.startswith(TRANSFORMER_LENS_FORMAT_OWNERS)
