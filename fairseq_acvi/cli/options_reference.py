"""The options reference, docs/options.md, generated from the plugin's own parsers.

    fairseq-acvi-options-reference                 # (re)write docs/options.md
    fairseq-acvi-options-reference --check         # exit 1 if docs/options.md is out of date

Every table is read from what fairseq sees: each model's ``add_args`` (or, for a dataclass model,
its dataclass through fairseq's ``gen_parser_from_dataclass``), every architecture preset run on an
empty ``argparse.Namespace`` (the values it sets, sizes included), every context-inference
variant's ``DEFAULTS``, and the dataclass options of the plugin's criteria, tasks and optimizers.
Nothing is written by hand, so a new option or a changed default shows up as a difference
(tests/test_options_reference.py).
"""
import argparse
import os
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

REGENERATE = "fairseq-acvi-options-reference"
DEFAULT_OUT = os.path.join("docs", "options.md")

HEADER = f"""# Options reference

Generated from the plugin's parsers by `{REGENERATE}` (module
`fairseq_acvi/cli/options_reference.py`); do not edit by hand: run the command from the repository
root after changing an option or a default (tests/test_options_reference.py checks that this page
is what the command writes now).

**On the command line.** fairseq's `--help` does not list a model's options, even with `--arch`:
fairseq adds them only after a first parse of the command line, and `--help` ends the command at
that first parse (`fairseq-train --user-dir fairseq_acvi --arch acvi_lstm --help` shows no
`--encoder-hidden-size`; checked with fairseq 0.12.3.1). This page is therefore the reference.

A model's options default to `None` in its parser: the architecture preset (`--arch`) fills every
value the command line leaves unset, so the value a model trains with is the preset's, listed under
*Architecture presets*. A context-inference variant's options default to that variant's values
(*Context-inference variants*) unless the preset sets them. Commands: docs/commands.md.
"""


def _cell(value) -> str:
    """One table cell: whitespace collapsed, ``|`` escaped."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _default(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, str):
        return f"`{value}`" if value else "`''`"
    return f"`{value!r}`"


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if text == argparse.SUPPRESS:
        return ""
    try:
        text = text % {"default": action.default, "choices": action.choices}
    except (KeyError, TypeError, ValueError):
        pass
    return text


def option_rows(parser: argparse.ArgumentParser) -> List[Tuple[str, str, str, str]]:
    """(flags, default, choices, help) of every optional argument of ``parser``, in its order."""
    rows = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        choices = ", ".join(map(str, action.choices)) if action.choices else ""
        rows.append((", ".join(f"`{s}`" for s in action.option_strings), _default(action.default),
                     choices, _help(action)))
    return rows


def options_table(parser: argparse.ArgumentParser) -> str:
    lines = ["| option | default | choices | help |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in option_rows(parser)]
    return "\n".join(lines) + "\n"


def dataclass_parser(dc) -> argparse.ArgumentParser:
    """The arguments fairseq makes of the dataclass ``dc`` (defaults kept)."""
    from fairseq.dataclass.utils import gen_parser_from_dataclass
    parser = argparse.ArgumentParser(add_help=False)
    gen_parser_from_dataclass(parser, dc())
    return parser


def _ours(obj) -> bool:
    return getattr(obj, "__module__", "").startswith("fairseq_acvi")


def _plugin_parsers(classes, dataclasses) -> Dict[str, argparse.ArgumentParser]:
    """Name -> parser of every plugin entry of a fairseq registry ``classes``: its dataclass's
    (``dataclasses``) where it has one, else what its ``add_args`` adds."""
    out = {}
    for name, cls in classes.items():
        if not _ours(cls):
            continue
        if name in dataclasses:
            out[name] = dataclass_parser(dataclasses[name])
        else:
            parser = argparse.ArgumentParser(add_help=False)
            if hasattr(cls, "add_args"):
                cls.add_args(parser)
            out[name] = parser
    return out


def model_parsers() -> Dict[str, argparse.ArgumentParser]:
    """Model name -> the parser of its options, for every model the plugin registers."""
    from fairseq.models import MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY
    return _plugin_parsers(MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY)


def architectures() -> Dict[str, List[str]]:
    """Model name -> its architecture presets (registration order)."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY, ARCH_MODEL_REGISTRY
    out: Dict[str, List[str]] = {}
    for arch, cls in ARCH_MODEL_REGISTRY.items():
        if _ours(cls):
            out.setdefault(ARCH_MODEL_NAME_REGISTRY[arch], []).append(arch)
    return out


def preset_values(arch: str) -> Dict[str, object]:
    """The values the architecture function of ``arch`` sets on an empty Namespace."""
    from fairseq.models import ARCH_CONFIG_REGISTRY
    args = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[arch](args)
    return dict(sorted(vars(args).items()))


def registry_parsers(kind: str) -> Dict[str, argparse.ArgumentParser]:
    """Name -> parser of every plugin entry of fairseq's ``kind`` registry (criterion, optimizer,
    lr_scheduler) or of its tasks (``kind == "task"``)."""
    if kind == "task":
        from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY
        classes, dataclasses = TASK_REGISTRY, TASK_DATACLASS_REGISTRY
    else:
        from fairseq.registry import REGISTRIES
        classes, dataclasses = REGISTRIES[kind]["registry"], REGISTRIES[kind]["dataclass_registry"]
    return _plugin_parsers(classes, dataclasses)


def context_variants() -> Dict[str, dict]:
    """Variant name -> the ``DEFAULTS`` it adds to those every variant shares (key ``"(all)"``:
    ``ContextInference.DEFAULTS``)."""
    from fairseq_acvi.modules.context import CONTEXT_REGISTRY, ContextInference
    shared = dict(ContextInference.DEFAULTS)
    out = {"(all)": shared}
    for name, cls in CONTEXT_REGISTRY.items():
        own = {}
        for klass in reversed(cls.__mro__):
            own.update(getattr(klass, "DEFAULTS", {}) or {})
        out[name] = {k: v for k, v in own.items() if k not in shared or shared[k] != v}
    return out


def _values_table(values: Dict[str, object], base: Optional[Dict[str, object]] = None) -> str:
    lines = ["| option | value |", "|---|---|"]
    for key, value in values.items():
        if base is not None and key in base and base[key] == value:
            continue
        lines.append(f"| `--{key.replace('_', '-')}` | {_cell(_default(value))} |")
    return "\n".join(lines) + "\n"


def _section_parsers(title: str, intro: str, parsers: Dict[str, argparse.ArgumentParser]) -> List[str]:
    parts = [f"## {title}\n\n{intro}\n"]
    for name, parser in parsers.items():
        table = options_table(parser) if option_rows(parser) else "No options of its own.\n"
        parts.append(f"### `{name}`\n\n{table}")
    return parts


def render() -> str:
    """The whole of docs/options.md."""
    import fairseq_acvi  # noqa: F401  (registers everything)
    from fairseq_acvi.models.legacy_names import LEGACY_ARCHITECTURES

    parts = [HEADER]
    parts += _section_parsers(
        "Models", "Each model's options (`--arch <model or preset>` makes them known to fairseq).",
        model_parsers())

    parts.append("## Architecture presets\n\nWhat each `--arch` sets when the command line leaves "
                 "an option unset: the model's base preset in full, every other preset of the same "
                 "model as its differences from the base (all other values equal the base's).\n")
    for model, archs in architectures().items():
        base = preset_values(model) if model in archs else None
        for arch in archs:
            if arch in LEGACY_ARCHITECTURES:
                continue
            values = preset_values(arch)
            if arch == model or base is None:
                if not values:
                    body = ("Sets nothing: every value is the model's option default (*Models*, "
                            f"`{model}`).\n")
                else:
                    body = _values_table(values)
                parts.append(f"### `{arch}` (model `{model}`)\n\n{body}")
            else:
                diff = _values_table(values, base)
                body = diff if diff.count("\n") > 2 else "Same values as the base preset.\n"
                parts.append(f"### `{arch}` (model `{model}`, differences from `{model}`)\n\n{body}")
    parts.append("Older names kept for old checkpoints, each equal to its model's base preset: "
                 + ", ".join(f"`{old}` (`{model}`)" for old, (model, _) in
                             LEGACY_ARCHITECTURES.items()) + ".\n")

    parts.append("## Context-inference variants\n\n`--context-inference <variant>` (models "
                 "`acvi_lstm`, `acvi_pointer_generator`, `acvi_video_captioner`, "
                 "`acvi_transformer`); a variant's options (help under *Models*) default to these "
                 "values unless the preset sets them, and are refused with another variant.\n")
    for name, defaults in context_variants().items():
        body = _values_table(defaults) if defaults else "No options of its own.\n"
        title = "Shared by every variant" if name == "(all)" else f"`{name}`"
        parts.append(f"### {title}\n\n{body}")

    parts += _section_parsers("Criteria", "`--criterion <name>`.", registry_parsers("criterion"))
    parts += _section_parsers("Tasks", "`--task <name>`.", registry_parsers("task"))
    parts += _section_parsers("Optimizers", "`--optimizer <name>`.", registry_parsers("optimizer"))
    return "\n".join(p for p in parts if p)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Write docs/options.md (``--out``), or with ``--check`` compare it with what would be
    written (exit 1 and the command to run when it differs)."""
    parser = argparse.ArgumentParser(prog=REGENERATE, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="file to write (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the file differs from what would be written")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        try:
            with open(args.out, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print(f"{args.out} is out of date: run `{REGENERATE}` from the repository root",
                  file=sys.stderr)
            return 1
        return 0
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
