"""The ``interp`` command: a report on a shipped model, a report on any model, its hook points.

    interp demo [--out FILE]
    interp report --model NAME_OR_PATH --prompt TEXT [--corrupted TEXT] --out FILE
    interp hooks --model NAME_OR_PATH
    interp serve --model NAME_OR_PATH [--model ...] [--port PORT] [--host HOST --token TOKEN]
    interp harvest --model NAME_OR_PATH --data FILE_OR_DIR --hooks NAMES --out DIR [...]
    interp features --model NAME_OR_PATH --sae NAME_OR_PATH --data FILE --out DIR [...]
    interp graph --model NAME_OR_PATH --transcoders NAME_OR_FOLDER --prompt TEXT --out FILE

Exit codes: 0 success, 1 runtime error (a checkpoint that cannot be loaded, a prompt the
model cannot take), 2 usage error (bad or missing arguments, an unknown model, a corrupted
prompt of another length in tokens, an answer that is not one token). Text that reaches the
terminal has its control characters escaped, as ``repr`` writes them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

import interp
from interp.circuits.cli import add_parser as add_graph_parser
from interp.cli.support import CommandError, Parser, UsageError, run_command, terminal_text
from interp.harvest.cli import add_parser as add_harvest_parser
from interp.model import HookedTransformer
from interp.sae.cli import add_parser as add_features_parser
from interp.sae.cli import add_report_arguments, report_sections
from interp.serve.cli import add_parser as add_serve_parser
from interp.shipped import shipped_text_path
from interp.shipped.by_name import load_named_model
from interp.utils.malloc_tuning import keep_freed_memory
from interp.viz.report_data import prompt_tokens

# CommandError, UsageError, terminal_text and load_named_model live in interp.cli.support and
# interp.shipped.by_name (the subcommands' modules import them from there, never this module);
# they stay importable from here.
__all__ = [
    "DEMO_ANSWERS",
    "DEMO_CORRUPTED",
    "DEMO_MODEL",
    "DEMO_PROMPT",
    "CommandError",
    "UsageError",
    "build_parser",
    "check_report_inputs",
    "hook_shapes",
    "load_named_model",
    "main",
    "terminal_text",
]

DEMO_MODEL = "attn-only-2l"
# attn-only-2l reads abstract symbols (numbers). A random sequence of 12 symbols, then its
# first 11 again: the induction head predicts the 12th ("501") from the first copy. The
# corrupted prompt changes that first copy's "501" to "77", so patching shows where it is read.
_SEQUENCE = "23 187 402 9 311 76 450 128 264 35 199"
DEMO_PROMPT = f"{_SEQUENCE} 501 {_SEQUENCE}"
DEMO_CORRUPTED = f"{_SEQUENCE} 77 {_SEQUENCE}"
DEMO_ANSWERS = ("501", "77")


def check_report_inputs(
    model: HookedTransformer,
    prompt: str,
    corrupted: str | None,
    answers: dict[str, str | None],
) -> None:
    """A ``UsageError`` when the corrupted prompt's length in tokens differs from the
    prompt's, or an answer (by its flag in ``answers``) is not exactly one token; a
    ``PromptTooLongError`` (also exit 2) when a prompt is longer than the model's context.

    Example:
        >>> check_report_inputs(model, DEMO_PROMPT, DEMO_CORRUPTED, {"--answer": DEMO_ANSWERS[0]})
        >>> check_report_inputs(model, DEMO_PROMPT, "23 187", {})
        Traceback (most recent call last):
        interp.cli.support.UsageError: ...
    """
    prompt_tokens(model, prompt, "prompt (--prompt)")  # not longer than the context
    if corrupted is not None:
        prompt_tokens(model, corrupted, "corrupted prompt (--corrupted)")
    tokens = model.to_str_tokens(prompt)
    if corrupted is not None:
        corrupted_tokens = model.to_str_tokens(corrupted)
        if len(corrupted_tokens) != len(tokens):
            raise UsageError(
                f"--corrupted is {len(corrupted_tokens)} tokens and --prompt {len(tokens)} "
                f"({corrupted_tokens} vs {tokens}); patching swaps activations position by "
                "position, so give prompts of the same length in tokens (change words, not "
                "the number of words)."
            )
    for flag, answer in answers.items():
        if answer is None:
            continue
        pieces = model.to_str_tokens(answer, prepend_bos=False)
        if len(pieces) != 1:
            raise UsageError(
                f"{flag} {answer!r} is {len(pieces)} tokens for {model.cfg.model_name} "
                f"({pieces}); give one token, e.g. {flag} {pieces[0]!r}."
            )


def _report(
    model: HookedTransformer,
    prompt: str,
    out: Path,
    corrupted: str | None,
    answers: tuple[str | None, str | None],
    sections: Sequence[str] = (),
    self_contained: bool = False,
) -> None:
    from interp.viz.report import summary_text, write_report

    path, analysis = write_report(
        model,
        prompt,
        out,
        corrupted,
        answers[0],
        answers[1],
        extra_sections=sections,
        self_contained=self_contained,
    )
    print(terminal_text(f"report written to {path.resolve()}"))
    print(terminal_text(summary_text(analysis)))


def run_demo(args: argparse.Namespace) -> None:
    model = interp.load_model(DEMO_MODEL)
    _report(model, DEMO_PROMPT, args.out, DEMO_CORRUPTED, DEMO_ANSWERS)


def run_report(args: argparse.Namespace) -> None:
    model = load_named_model(args.model)
    answers = {"--answer": args.answer, "--wrong-answer": args.wrong_answer}
    check_report_inputs(model, args.prompt, args.corrupted, answers)
    sections = []
    if args.sae:
        sections = report_sections(
            model, args.prompt, args.sae, args.sae_data, args.allow_model_mismatch
        )
    answer_pair = tuple(answers.values())
    _report(
        model, args.prompt, args.out, args.corrupted, answer_pair, sections, args.self_contained
    )


def hook_shapes(model: HookedTransformer) -> list[tuple[str, tuple[int, ...] | None]]:
    """Every hook point's name and its activation's shape on a batch of one 1-token sequence,
    in the order the forward pass reaches them (a hook that does not fire on it, None, last).

    Example:
        >>> hook_shapes(model)[:2]
        [('hook_embed', (1, 1, 128)), ('hook_pos_embed', (1, 1, 128))]
    """
    tokens = torch.zeros(1, 1, dtype=torch.long, device=model.device)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    fired = [(name, tuple(activation.shape)) for name, activation in cache.items()]
    return fired + [(name, None) for name in model.hook_dict if name not in cache]


def run_hooks(args: argparse.Namespace) -> None:
    model = load_named_model(args.model)
    shapes = hook_shapes(model)
    width = max(len(name) for name, _ in shapes)
    name = terminal_text(model.cfg.model_name)
    print(f"{len(shapes)} hook points of {name}; shapes for 1 sequence of 1 token")
    for hook, shape in shapes:
        shown = list(shape) if shape is not None else "(does not fire on a forward pass)"
        print(terminal_text(f"{hook:<{width}}  {shown}"))


def run_list(args: argparse.Namespace) -> None:
    print("models (interp.load_model(NAME), --model NAME):")
    print("".join(f"  {name}\n" for name in interp.list_models()), end="")
    print("SAEs (interp.load_sae(NAME), --sae NAME):")
    print("".join(f"  {name}\n" for name in interp.list_saes()), end="")


def _text(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def _out_file(value: str) -> Path:
    path = Path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{value!r} is a folder; give a file name like report.html"
        )
    return path


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="interp",
        description="Mechanistic interpretability for decoder-only transformers (the shipped "
        "models, and GPT-2, GPT-NeoX/Pythia, Llama, Mistral, Mixtral, Qwen 2/3 and their MoE "
        "models, Gemma 1-3, OPT, GPT-Neo, GPT-J, Phi 1-4, OLMo 2, OLMoE, BLOOM and gpt-oss "
        "checkpoints): offline HTML reports (attention heads, logit lens, head scores, "
        "patching), a live dashboard, SAE features, attribution graphs and hook listings.",
        epilog="Exit codes: 0 ok, 1 runtime error, 2 usage error.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="write the report for a shipped model on a built-in prompt",
        description=f"Load the shipped {DEMO_MODEL!r} model and write the HTML report for a "
        "repeated sequence of symbols (with a corrupted version for patching); print a summary.",
    )
    demo.add_argument(
        "--out",
        type=_out_file,
        default=Path("interp_demo_report.html"),
        help="where to write the report (default: %(default)s)",
    )
    demo.set_defaults(run=run_demo, parser=demo)

    report = commands.add_parser(
        "report",
        help="write the HTML report for a model and prompt",
        description="Write an offline HTML report: tokens, prediction, every layer's "
        "attention heads, the logit lens, head scores, and with --corrupted a patching heatmap. "
        "The scripts it loads go to report_assets/ beside it (or inline: --self-contained).",
    )
    report.add_argument(
        "--model",
        required=True,
        help="a shipped model name or a checkpoint folder (interp or Hugging Face format)",
    )
    report.add_argument("--prompt", required=True, type=_text, help="the text to analyse")
    report.add_argument(
        "--corrupted",
        type=_text,
        help="a corrupted prompt with the same "
        "number of tokens; adds a residual-stream patching heatmap",
    )
    report.add_argument(
        "--answer",
        type=_text,
        help="the token the clean prompt should "
        "predict (default: its top prediction), e.g. ' Mary'",
    )
    report.add_argument(
        "--wrong-answer",
        type=_text,
        help="the competing token (default: the corrupted prompt's top prediction), e.g. ' John'",
    )
    report.add_argument("--out", required=True, type=_out_file, help="the HTML file to write")
    report.add_argument(
        "--self-contained",
        action="store_true",
        help="inline the scripts (one 1.9 MB file for a short prompt) instead of report_assets/",
    )
    add_report_arguments(report)
    report.set_defaults(run=run_report, parser=report)

    hooks = commands.add_parser(
        "hooks",
        help="list every hook point of a model with its shape",
        description="List every hook point name with the shape of its activation on a "
        "batch of one 1-token sequence.",
    )
    hooks.add_argument("--model", required=True, help="a shipped model name or checkpoint folder")
    hooks.set_defaults(run=run_hooks, parser=hooks)

    shipped = commands.add_parser(
        "list",
        help="list the models and SAEs shipped with interp",
        description="List the shipped models and SAEs by the names --model and --sae take.",
    )
    shipped.set_defaults(run=run_list, parser=shipped)

    add_serve_parser(commands)
    add_harvest_parser(commands)
    add_features_parser(commands)
    add_graph_parser(commands)
    return parser


# Commands that run forward after forward: run as the program (``interp ...``, argv from the
# command line), the process is theirs, so glibc keeps the memory they free.
MANY_FORWARDS = ("demo", "serve", "harvest")
# The options that read a text file (.txt or .txt.gz), which also take a shipped text's name
# (interp.shipped.SHIPPED_TEXTS). interp harvest's --data reads other formats: not among them.
DATA_OPTIONS = ("data", "contexts_data", "sae_data")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``interp`` command; returns its exit code (0 ok, 1 runtime). A usage error
    prints the usage and exits 2 (``SystemExit``), as argparse does.

    Example:
        >>> main(["hooks", "--model", "attn-only-2l"])
        20 hook points of attn-only-2l; ...
    """
    args = build_parser().parse_args(argv)
    if args.command == "report" and (args.answer or args.wrong_answer) and not args.corrupted:
        args.parser.error("--answer and --wrong-answer need --corrupted")
    if args.command == "report" and args.sae_data and not args.sae:
        args.parser.error("--sae-data needs --sae")
    for option in DATA_OPTIONS:  # a shipped text by name ("tinyshakespeare"): its file
        if args.command != "harvest" and isinstance(getattr(args, option, None), str):
            setattr(args, option, shipped_text_path(getattr(args, option)))
    if argv is None and args.command in MANY_FORWARDS:
        keep_freed_memory()  # the process is this command's own (see interp.utils.malloc_tuning)
    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
