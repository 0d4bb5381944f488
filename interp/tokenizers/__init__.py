"""Tokenizers that work with no network: GPT-2's byte-level BPE, and characters.

``SymbolTokenizer`` writes the abstract tokens of synthetic-data models as numbers.
Every tokenizer here speaks the part of Hugging Face's tokenizer interface that
TransformerLens scripts use (``tokenizer(texts, return_tensors="pt", padding=True)``,
``encode``, ``decode``, ``batch_decode``, ``convert_ids_to_tokens``, ``padding_side``,
``bos_token``/``bos_token_id``, ``eos_*``, ``pad_*``, ``vocab_size``, ``len``), plus
``token_str`` (one token's text). Hugging Face tokenizers are wrapped by ``get_tokenizer``,
which passes every call through to them.
"""

from interp.tokenizers.base import Encoding, TokenizerBase, check_padding_side, check_token_ids
from interp.tokenizers.char import CharTokenizer
from interp.tokenizers.gpt2 import GPT2Tokenizer
from interp.tokenizers.hugging_face import HuggingFaceTokenizer
from interp.tokenizers.named import get_tokenizer, tokenizer_from_dict, tokenizer_to_dict
from interp.tokenizers.symbols import SymbolTokenizer

__all__ = [
    "CharTokenizer",
    "Encoding",
    "GPT2Tokenizer",
    "HuggingFaceTokenizer",
    "SymbolTokenizer",
    "TokenizerBase",
    "check_padding_side",
    "check_token_ids",
    "get_tokenizer",
    "tokenizer_from_dict",
    "tokenizer_to_dict",
]
