"""The plugin's command-line tools, each a module with ``main(argv)`` (``generate``: ``cli_main``),
run as ``python -m fairseq_acvi.cli.<name>`` or as the console command ``fairseq-acvi-<name>``
that ``pip install`` makes (``setup.py``; ``_`` becomes ``-``)."""
import importlib
import sys

#: module name -> its entry function; the console command is fairseq-acvi-<name with - for _>
COMMANDS = {"babi_report": "main", "calibration": "main", "eval_captioning": "main",
            "eval_summarization": "main", "generate": "cli_main", "guess_number": "main",
            "lead_baseline": "main", "mt_report": "main", "summ_report": "main",
            "attention_pictures": "main"}


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
