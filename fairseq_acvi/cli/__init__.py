"""The plugin's command-line tools, each a module with ``main(argv)`` (``generate``: ``cli_main``),
run as ``python -m fairseq_acvi.cli.<name>`` or as the console command ``fairseq-acvi-<name>``
that ``pip install`` makes (``setup.py``; ``_`` becomes ``-``).

The wrappers of fairseq's own commands (``train``, ``validate``, ``interactive``, ``hydra_train``,
``generate``) load the plugin by themselves: :func:`with_user_dir` adds ``--user-dir`` (hydra:
``common.user_dir=``) naming the installed package's folder when the command line names none, so
they work from any folder (docs/commands.md)."""
import importlib
import os
import sys
from typing import List, Optional, Sequence

#: module name -> its entry function; the console command is fairseq-acvi-<name with - for _>
COMMANDS = {"babi_report": "main", "calibration": "main", "eval_captioning": "main",
            "eval_summarization": "main", "generate": "cli_main", "guess_number": "main",
            "lead_baseline": "main", "mt_report": "main", "summ_report": "main",
            "attention_pictures": "main", "prepare_parallel": "main",
            "attention_grid_report": "main", "normalizers_report": "main", "keep_runs": "main",
            "aligned_drop": "main",
            # fairseq's own commands with the plugin loaded (--user-dir added when absent)
            "train": "main", "validate": "main", "interactive": "main", "hydra_train": "main",
            "options_reference": "main"}


def plugin_dir() -> str:
    """The folder of the imported ``fairseq_acvi`` package (the repository's copy under
    ``pip install -e .``, site-packages' under a regular install): what ``--user-dir`` must name."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _names_user_dir(argv: Sequence[str], keys: Sequence[str]) -> bool:
    return any(a == k or a.startswith(k + "=") for a in argv for k in keys)


def with_user_dir(argv: Optional[Sequence[str]]) -> List[str]:
    """``argv`` (argparse style) with ``--user-dir <plugin_dir()>`` in front unless it already has
    a ``--user-dir`` (fairseq's own parser of that option takes no abbreviation)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if _names_user_dir(argv, ("--user-dir",)):
        return argv
    return ["--user-dir", plugin_dir()] + argv


def with_hydra_user_dir(argv: Optional[Sequence[str]]) -> List[str]:
    """Hydra overrides ``argv`` with ``common.user_dir=<plugin_dir()>`` appended unless one of
    them sets ``common.user_dir`` (plain, ``+`` or ``++``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if _names_user_dir(argv, ("common.user_dir", "+common.user_dir", "++common.user_dir")):
        return argv
    return argv + [f"common.user_dir={plugin_dir()}"]


def run_fairseq_cli(cli_main, argv: Sequence[str], prog: str):
    """Run one of fairseq's own ``cli_main()`` (which read ``sys.argv``) on ``argv``, with
    ``sys.argv[0]`` = ``prog``; ``sys.argv`` is restored afterwards."""
    saved = sys.argv
    sys.argv = [prog] + list(argv)
    try:
        return cli_main()
    finally:
        sys.argv = saved


def console_scripts():
    """``console_scripts`` entries for setup.py."""
    return [f"fairseq-acvi-{name.replace('_', '-')} = fairseq_acvi.cli:run_{name}"
            for name in COMMANDS]


def _runner(name: str):
    def run() -> int:
        module = importlib.import_module(f"{__name__}.{name}")
        out = getattr(module, COMMANDS[name])(sys.argv[1:])
        return out if isinstance(out, int) else 0     # some return their results (a dict)
    run.__name__ = f"run_{name}"
    run.__doc__ = f"The console command fairseq-acvi-{name.replace('_', '-')}."
    return run


for _name in COMMANDS:
    globals()[f"run_{_name}"] = _runner(_name)
