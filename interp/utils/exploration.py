"""``test_prompt``: how a model ranks the answer to a prompt, printed as TransformerLens does."""

from __future__ import annotations

from typing import Any

import torch


def _print_bold(text: str) -> None:
    """Print with rich's ``[b]`` markup when rich is installed, else as plain text."""
    try:
        from rich import print as rich_print
    except ImportError:
        print(text.replace("[b]", "").replace("[/b]", ""))
    else:
        rich_print(text)


@torch.inference_mode()
def test_prompt(
    prompt: str,
    answer: str | list[str],
    model: Any,
    prepend_space_to_answer: bool = True,
    print_details: bool = True,
    prepend_bos: bool | None = None,
    top_k: int = 10,
) -> None:
    """Print the prompt's tokens, the answer's rank, logit and probability, and the top-k next
    tokens at each answer position (one position per answer when ``answer`` is a list: the
    answers then compete as next tokens). Prints only, as TransformerLens's ``test_prompt``.

    Example:
        >>> shakespeare = interp.load_model("shakespeare-char")   # one token a character
        >>> interp.utils.test_prompt("To be, or not to", "be", shakespeare, top_k=3)
        Tokenized prompt: ['T', 'o', ' ', 'b', 'e', ',', ' ', 'o', 'r', ' ', 'n', 'o', 't',
         ' ', 't', 'o']
        Tokenized answer: [' ', 'b', 'e']
        Performance on answer token:
        Rank: 0        Logit:  6.53 Prob: 78.28% Token: | |
        Top 0th token. Logit:  6.53 Prob: 78.28% Token: | |
        ...
        Ranks of the answer tokens: [(' ', 0), ('b', 4), ('e', 0)]
    """
    answers = [answer] if isinstance(answer, str) else list(answer)
    if not answers or not all(isinstance(a, str) for a in answers):
        raise ValueError(f"answer must be a string or a non-empty list of strings, got {answer!r}.")
    n_answers = len(answers)
    multiple = n_answers > 1
    if prepend_space_to_answer:
        answers = [a if a.startswith(" ") else " " + a for a in answers]
    prompt_tokens = model.to_tokens(prompt, prepend_bos=prepend_bos)
    if multiple:  # each answer's first token, one row per answer
        answer_tokens = torch.cat([model.to_tokens(a, prepend_bos=False)[:, :1] for a in answers])
    else:
        answer_tokens = model.to_tokens(answers[0], prepend_bos=False)
    tokens = torch.cat([prompt_tokens.expand(n_answers, -1), answer_tokens.to(prompt_tokens)], 1)
    prompt_str_tokens = model.to_str_tokens(prompt, prepend_bos=prepend_bos)
    answer_str_tokens = [model.to_str_tokens(a, prepend_bos=False) for a in answers]
    prompt_length = len(prompt_str_tokens)
    answer_length = 1 if multiple else len(answer_str_tokens[0])
    if print_details:
        print("Tokenized prompt:", prompt_str_tokens)
        if multiple:
            print("Tokenized answers:", answer_str_tokens)
        else:
            print("Tokenized answer:", answer_str_tokens[0])

    logits = model(tokens)
    probs = logits.softmax(dim=-1)
    answer_ranks = []
    for index in range(prompt_length, prompt_length + answer_length):
        targets = tokens[:, index]
        target_strs = [strs[index - prompt_length] for strs in answer_str_tokens]
        token_probs = probs[:, index - 1]  # the logits at index - 1 predict the token at index
        sorted_probs, sorted_tokens = token_probs.sort(descending=True)
        ranks = sorted_tokens.argsort(-1)[torch.arange(n_answers), targets.cpu()].tolist()
        answer_ranks.append(list(zip(target_strs, ranks, strict=True)))
        if not print_details:
            continue
        lines = [
            f"[b]Rank: {ranks[i]: <8} Logit: {logits[i, index - 1, targets[i]].item():5.2f} "
            f"Prob: {token_probs[i, targets[i]].item():6.2%} Token: |{target_strs[i]}|[/b]"
            for i in range(n_answers)
        ]
        _print_bold(f"Performance on answer token{'s' if multiple else ''}:\n" + "\n".join(lines))
        for i in range(top_k):
            token = sorted_tokens[0, i]
            print(
                f"Top {i}th token. Logit: {logits[0, index - 1, token].item():5.2f} "
                f"Prob: {sorted_probs[0, i].item():6.2%} Token: |{model.to_string(token[None])}|"
            )
    ranks_shown = [ranks[0] for ranks in answer_ranks] if not multiple else answer_ranks
    _print_bold(f"[b]Ranks of the answer tokens:[/b] {ranks_shown}")


test_prompt.__test__ = False  # a name pytest would otherwise collect as a test
