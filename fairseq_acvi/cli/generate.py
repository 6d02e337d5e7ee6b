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
from fairseq_acvi.generation.uncertainty import enable_uncertainty
from fairseq_acvi.modules.uncertainty import ENTROPY, MUTUAL_INFORMATION

LINES = {"mi": (("U", MUTUAL_INFORMATION),),
         "all": (("U", MUTUAL_INFORMATION), ("UH", ENTROPY))}


def format_line(prefix: str, sample_id: int, values) -> str:
    """``PREFIX-<id>\\t<v_1> <v_2> …`` with values in nats written in bits, 4 decimals."""
    return f"{prefix}-{sample_id}\t" + " ".join(f"{v / math.log(2):.4f}" for v in values)


class UncertaintyLines:
    """The output file of fairseq's generate loop: passes every line through and writes the
    uncertainty lines after each ``P-<id>`` line. ``holder["generator"]`` is the enabled generator;
    the j-th ``P-`` line of an id belongs to its j-th hypothesis."""

    def __init__(self, out, holder: dict, mode: str):
        self.out, self.holder, self.lines = out, holder, LINES[mode]
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
        u = self.holder["generator"].last_batch[sid][j]              # (T, 3) nats
        for prefix, field in self.lines:
            self.out.write(format_line(prefix, sid, u[:, field].tolist()) + "\n")

    def flush(self):
        if self.buf:
            self.out.write(self.buf)
            self.buf = ""
        self.out.flush()

    def __getattr__(self, name):
        return getattr(self.out, name)


@contextlib.contextmanager
def uncertainty_hooks(mode: str):
    """Within the block, fairseq's generate uses an uncertainty-recording generator and writes
    the ``U-`` lines (module docstring)."""
    holder = {}
    setup_task, main_loop = fairseq.tasks.setup_task, fairseq_generate._main

    def setup_task_hooked(cfg, **kwargs):
        task = setup_task(cfg, **kwargs)
        build = task.build_generator

        def build_generator(*args, **kw):
            holder["generator"] = enable_uncertainty(build(*args, **kw))
            return holder["generator"]

        task.build_generator = build_generator
        return task

    def main_hooked(cfg, output_file):
        lines = UncertaintyLines(output_file, holder, mode)
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
                            "(bits); 'all' adds UH-<id>, the predictive entropy (docs/uncertainty.md)")
    return parser


def cli_main(argv: Optional[list] = None):
    """Run fairseq's generate on ``argv`` (default: the command line), ``--user-dir`` added when
    absent (:func:`fairseq_acvi.cli.with_user_dir`)."""
    args = options.parse_args_and_arch(build_parser(), input_args=with_user_dir(argv))
    mode = args.print_uncertainty
    if mode is None:
        return fairseq_generate.main(args)
    with uncertainty_hooks(mode):
        return fairseq_generate.main(args)


if __name__ == "__main__":
    cli_main(sys.argv[1:])
