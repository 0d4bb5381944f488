"""``HuggingFaceTokenizer``: a Hugging Face tokenizer with the few additions interp's own
tokenizers have (``token_str``, checked ids), every other call passed through."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from interp.tokenizers.base import check_token_ids


class HuggingFaceTokenizer:
    """A ``transformers`` tokenizer with ``token_str`` added, and ids outside its
    vocabulary refused by ``decode``; every other attribute and call is the tokenizer's own.
    As in TransformerLens, a tokenizer without a pad token gets its EOS token as one.

    Example:
        >>> import tokenizers, transformers
        >>> from interp.tokenizers import get_tokenizer
        >>> words = tokenizers.Tokenizer(tokenizers.models.WordLevel(
        ...     {"<unk>": 0, "</s>": 1, "a": 2, "b": 3, "c": 4}, unk_token="<unk>"))
        >>> words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
        >>> hf = transformers.PreTrainedTokenizerFast(  # or AutoTokenizer.from_pretrained(folder)
        ...     tokenizer_object=words, unk_token="<unk>", eos_token="</s>")
        >>> tok = get_tokenizer(hf)
        >>> tok.pad_token                       # it had none: EOS pads
        '</s>'
        >>> tok(["a", "b c"], return_tensors="pt", padding=True)["input_ids"]
        tensor([[2, 1],
                [3, 4]])
        >>> tok.token_str(3)
        'b'
    """

    def __init__(self, hf_tokenizer: Any) -> None:
        if hf_tokenizer.pad_token is None and hf_tokenizer.eos_token is not None:
            hf_tokenizer.pad_token = hf_tokenizer.eos_token
        self.__dict__["hf_tokenizer"] = hf_tokenizer
        self.__dict__["name"] = getattr(hf_tokenizer, "name_or_path", "huggingface")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["hf_tokenizer"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.hf_tokenizer, name, value)  # padding_side, pad_token, ...

    def __len__(self) -> int:
        return len(self.hf_tokenizer)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.hf_tokenizer(*args, **kwargs)

    @property
    def pad_token_id(self) -> int:
        pad = self.hf_tokenizer.pad_token_id
        return pad if pad is not None else 0

    def decode(self, ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str:
        ids = check_token_ids(ids, len(self))
        return self.hf_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens, **kwargs)

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = False, **kwargs: Any):
        return [self.decode(row, skip_special_tokens, **kwargs) for row in sequences]

    def convert_ids_to_tokens(self, ids: Any, skip_special_tokens: bool = False) -> Any:
        single = isinstance(ids, int) or (isinstance(ids, Tensor) and ids.ndim == 0)
        checked = check_token_ids(ids, len(self))
        return self.hf_tokenizer.convert_ids_to_tokens(
            checked[0] if single else checked, skip_special_tokens=skip_special_tokens
        )

    def token_str(self, token_id: int) -> str:
        return self.decode([token_id])
