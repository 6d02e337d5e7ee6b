"""fairseq-generate with per-token uncertainty lines (docs/uncertainty.md).

Usage: every ``fairseq-generate`` argument, plus ``--print-uncertainty``::

    fairseq-acvi-generate DATA --path CKPT --beam 10 \\
        --model-overrides "{'mc_samples': 10}" --print-uncertainty

(or ``python -m fairseq_acvi.cli.generate``). The plugin is loaded by the command itself: without
a ``--user-dir`` it adds ``--user-dir`` naming the installed package (works from any folder).

This runs fairseq's own ``fairseq_cli.generate`` (not a copy of it). Without the option nothing is
changed at all. With it, two things are hooked for the duration of the run:

* the task's generator is passed through
  :func:`fairseq_acvi.generation.uncertainty.enable_uncertainty` (same search, same hypotheses;
  each finished hypothesis carries the uncertainties of its own beam path);
* after each hypothesis's ``P-<id>`` line the output gets, in the same style (one number per token
  of the hypothesis, ``</s>`` included, base 2 like ``P-``, 4 decimals):

      U-<id>    mutual information I = H[p̄] − E_k H[p_k] (epistemic part), bits
      UH-<id>   predictive entropy H[p̄] (``--print-uncertainty all`` only), bits

  (E_k H[p_k] = UH − U.) With ``--quiet`` there are no ``P-`` lines and so no ``U-`` lines.

  Where the prediction averages members (an ensemble ``--path a.pt:b.pt``, or ``--mc-dropout``),
  U and UH are over all members × context samples, and one more line follows:

      UM-<id>   the members' part of U: what their predictions disagree about, bits

  With ``--print-sentence-uncertainty``, a line per hypothesis of its sentence-level scores
  (:mod:`fairseq_acvi.generation.sentence_scores`, bits, 6 significant digits):

      US-<id>   mean_mi=… max_mi=… entropy=… logprob=…

Monte-Carlo dropout (``--mc-dropout K``, optionally ``--mc-dropout-rate P``; docs/uncertainty.md
§6): every model is wrapped by :func:`fairseq_acvi.modules.seq2seq.mc_dropout.wrap_mc_dropout` before
the generator is built: K dropout chains, averaged in probability space at every step, their masks
shared by the beam rows of a sentence. These are options of this command, beside
``--print-uncertainty``, and not model options: they change how a trained model is evaluated, not
the model (a model option would be saved in checkpoints and read by training), and fairseq's own
generation options cannot be extended by a plugin.

Soft attention and K = 0 have one distribution per step: U is 0 and UH their entropy.
``fairseq-generate`` itself cannot print extra lines without a fork of its loop, hence this
entry point; the per-token values are also in ``hypo["uncertainty"]`` for code that calls the
generator directly.
"""
import contextlib
import math
import sys
from typing import Optional

import fairseq.tasks
import fairseq_cli.generate as fairseq_generate
from fairseq import options

from fairseq_acvi.cli import with_user_dir
from fairseq_acvi.generation.sentence_scores import SCORES
from fairseq_acvi.generation.uncertainty import enable_uncertainty
from fairseq_acvi.modules.seq2seq.mc_dropout import (check_members, check_rate, set_rows_per_sentence,
                                             wrap_mc_dropout)
from fairseq_acvi.mc_prediction.uncertainty import ENTROPY, MUTUAL_INFORMATION

LINES = {"mi": (("U", MUTUAL_INFORMATION),),
         "all": (("U", MUTUAL_INFORMATION), ("UH", ENTROPY))}


def format_line(prefix: str, sample_id: int, values) -> str:
    """``PREFIX-<id>\\t<v_1> <v_2> …`` with values in nats written in bits, 4 decimals."""
    return f"{prefix}-{sample_id}\t" + " ".join(f"{v / math.log(2):.4f}" for v in values)


class UncertaintyLines:
    """The output file of fairseq's generate loop: passes every line through and writes the
    uncertainty lines after each ``P-<id>`` line. ``holder["generator"]`` is the enabled generator;
    the j-th ``P-`` line of an id belongs to its j-th hypothesis."""

    def __init__(self, out, holder: dict, mode: Optional[str], sentence: bool = False):
        self.out, self.holder = out, holder
        self.lines = LINES[mode] if mode else ()
        self.sentence = sentence
        self.buf, self.seen = "", {}

    def write(self, text: str) -> int:
        self.buf += text
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            self.out.write(line + "\n")
            if line.startswith("P-"):
                self._after_p(line)
        return len(text)

    def _after_p(self, line: str) -> None:
        sid = int(line[2:].split("\t", 1)[0])
        j = self.seen.get(sid, 0)
        self.seen[sid] = j + 1
        hypo = self.holder["generator"].last_hypos[sid][j]
        u = hypo["uncertainty"]                                         # (T, 3) nats
        for prefix, field in self.lines:
            self.out.write(format_line(prefix, sid, u[:, field].tolist()) + "\n")
        if self.lines and "members_mi" in hypo:
            self.out.write(format_line("UM", sid, hypo["members_mi"].tolist()) + "\n")
        if self.sentence:
            scores = hypo["sentence_uncertainty"]                      # nats
            # 6 significant digits: a sentence's mean I can be far below the U- lines' 1e-4
            self.out.write(f"US-{sid}\t" + " ".join(f"{k}={scores[k] / math.log(2):.6g}"
                                                    for k in SCORES) + "\n")

    def flush(self):
        if self.buf:
            self.out.write(self.buf)
            self.buf = ""
        self.out.flush()

    def __getattr__(self, name):
        return getattr(self.out, name)


@contextlib.contextmanager
def uncertainty_hooks(mode: Optional[str], sentence: bool = False,
                      mc_dropout: Optional[int] = None, mc_dropout_rate: Optional[float] = None):
    """Within the block, fairseq's generate wraps its models for MC dropout (``mc_dropout`` K),
    uses an uncertainty-recording generator (``mode`` or ``sentence``) and writes the ``U-`` /
    ``US-`` lines (module docstring)."""
    holder = {}
    record = bool(mode) or sentence
    setup_task, main_loop = fairseq.tasks.setup_task, fairseq_generate._main

    def setup_task_hooked(cfg, **kwargs):
        task = setup_task(cfg, **kwargs)
        build = task.build_generator

        def build_generator(models, *args, **kw):
            if mc_dropout:
                models = [wrap_mc_dropout(m, mc_dropout, mc_dropout_rate) for m in models]
            gen = build(models, *args, **kw)
            if record:
                gen = enable_uncertainty(gen)
            elif mc_dropout:
                set_rows_per_sentence(models, gen.beam_size)
            holder["generator"] = gen
            return gen

        task.build_generator = build_generator
        return task

    def main_hooked(cfg, output_file):
        if not record:
            return main_loop(cfg, output_file)
        lines = UncertaintyLines(output_file, holder, mode, sentence)
        try:
            return main_loop(cfg, lines)
        finally:
            lines.flush()

    fairseq.tasks.setup_task, fairseq_generate._main = setup_task_hooked, main_hooked
    try:
        yield holder
    finally:
        fairseq.tasks.setup_task, fairseq_generate._main = setup_task, main_loop


def build_parser():
    parser = options.get_generation_parser()
    # as fairseq_cli.generate.cli_main does (tasks that read model args)
    parser.add_argument("--arch", "-a", metavar="ARCH", default="wav2vec2")
    group = parser.add_argument_group("Per-token uncertainty (fairseq_acvi)")
    group.add_argument("--print-uncertainty", nargs="?", const="mi", choices=sorted(LINES),
                       default=None,
                       help="after each P- line print U-<id>, the per-token mutual information "
                            "(bits); 'all' adds UH-<id>, the predictive entropy; UM-<id>, the "
                            "members' part, where the prediction averages members "
                            "(docs/uncertainty.md)")
    group.add_argument("--print-sentence-uncertainty", action="store_true",
                       help="after each P- line print US-<id>: the hypothesis's mean and max "
                            "token mutual information, mean predictive entropy and "
                            "length-normalised log-probability (bits; docs/uncertainty.md §7)")
    group.add_argument("--mc-dropout", type=int, metavar="K", default=None,
                       help="Monte-Carlo dropout: average, at every step, the distributions of K "
                            "dropout-masked chains of each model in probability space, the masks "
                            "shared by the beam rows of a sentence (docs/uncertainty.md §6; "
                            "LSTM seq2seq models of the plugin; default off)")
    group.add_argument("--mc-dropout-rate", type=float, metavar="P", default=None,
                       help="with --mc-dropout: this dropout probability wherever the model "
                            "applies dropout (default: the model's own, as trained)")
    return parser


def cli_main(argv: Optional[list] = None):
    """Run fairseq's generate on ``argv`` (default: the command line), ``--user-dir`` added when
    absent (:func:`fairseq_acvi.cli.with_user_dir`)."""
    args = options.parse_args_and_arch(build_parser(), input_args=with_user_dir(argv))
    mode, sentence = args.print_uncertainty, args.print_sentence_uncertainty
    mc = args.mc_dropout
    if mc is not None:
        check_members(mc)
    if args.mc_dropout_rate is not None:
        if mc is None:
            raise ValueError("--mc-dropout-rate needs --mc-dropout K")
        check_rate(args.mc_dropout_rate)
    if mode is None and not sentence and mc is None:
        return fairseq_generate.main(args)
    with uncertainty_hooks(mode, sentence, mc, args.mc_dropout_rate):
        return fairseq_generate.main(args)


if __name__ == "__main__":
    cli_main(sys.argv[1:])
