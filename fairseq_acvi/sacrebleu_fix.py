"""Make ``fairseq-generate --sacrebleu`` score with sacreBLEU.

What fairseq does wrong: ``--sacrebleu`` is still a generation option (``GenerationConfig.sacrebleu``)
and fairseq-generate's own warning tells the user to pass it "for standard 13a BLEU tokenization",
but since the scorers became a registry (``--scoring``) nothing reads it: the run is scored by the
built-in token BLEU (``BLEU4 = ...``) with no word, a different figure from the sacreBLEU the user
asked for. Scoring with ``--scoring sacrebleu`` is the registry's way, and with sacrebleu 2 the
scorer works (``fairseq/scoring/bleu.py``, ``SacrebleuScorer``).

The fix: when the namespace fairseq turns into its config has ``sacrebleu`` set and the scorer left
at its default (``bleu``), the scorer becomes ``sacrebleu`` with its defaults (13a tokenisation,
case-sensitive, word level), exactly as ``--scoring sacrebleu`` gives. A ``--scoring`` chosen by the
user is kept. The hook is ``fairseq.dataclass.utils.override_module_args``, which
``convert_namespace_to_omegaconf`` calls by its module name, so every command built on it sees the
fix.

Out of the plugin's reach: ``fairseq-score --sacrebleu`` (which crashes under sacrebleu 2, giving
file objects where sacreBLEU wants lists of strings) takes no ``--user-dir``; score a finished
decode with ``data_scripts/score_mt.py`` instead.
"""
from argparse import Namespace

from fairseq.dataclass import utils as dataclass_utils


def sacrebleu_defaults() -> dict:
    """The defaults of fairseq's ``SacrebleuConfig`` as namespace attributes (``sacrebleu_tokenizer``
    ``'13a'``, ``sacrebleu_lowercase`` False, ``sacrebleu_char_level`` False)."""
    from fairseq.scoring.bleu import SacrebleuConfig
    out = {}
    for name, field in SacrebleuConfig.__dataclass_fields__.items():
        if name.startswith("_"):
            continue
        value = field.default
        out[name] = str(value) if name == "sacrebleu_tokenizer" else value
    return out


def route_sacrebleu_flag(args: Namespace) -> bool:
    """Set ``args.scoring = 'sacrebleu'`` (and the scorer's default options where ``args`` lacks
    them) when ``args.sacrebleu`` is set and ``args.scoring`` is fairseq's default ``'bleu'``;
    returns whether it changed ``args``."""
    if args is None or not getattr(args, "sacrebleu", False) or getattr(args, "scoring", None) != "bleu":
        return False
    args.scoring = "sacrebleu"
    for name, value in sacrebleu_defaults().items():
        if not hasattr(args, name):
            setattr(args, name, value)
    return True


def install() -> None:
    """Wrap ``fairseq.dataclass.utils.override_module_args`` once with :func:`route_sacrebleu_flag`."""
    original = dataclass_utils.override_module_args
    if getattr(original, "_acvi_sacrebleu", False):
        return

    def override_module_args(args):
        route_sacrebleu_flag(args)
        return original(args)

    override_module_args._acvi_sacrebleu = True
    dataclass_utils.override_module_args = override_module_args


install()
