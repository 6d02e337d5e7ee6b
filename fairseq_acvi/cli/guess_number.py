"""Play "Guess the number" with a trained memory network (docs/method.md §4.4, D §6.6).

    python -m fairseq_acvi.cli.guess_number --path CKPT --data DIR [--games 100] [--seed 1]
        [--mc-samples 10] [--transcripts 3] [--results-json OUT.json]

``DIR`` is the folder the model was trained on (``data_scripts/make_guess_number.py`` output); its
``guess_number.json`` gives the range and dialogue style (``--low/--high/--style`` override it).
A simulated teacher draws ``--games`` fresh targets from ``--seed`` and answers every guess from the
true target; a game stops when won or after ``--max-tries`` (100). Each round the model reads the
dialogue so far (the last ``memory_size`` statement lines, as in training) and the question
``what is your guess ?``; its output is the most probable token of the answer distribution
(t-MEM-NN: the average over ``--mc-samples`` S draws of the weights, docs/method.md §4.2). A token that is
not a number is an *invalid* guess: it counts as out of bounds, the teacher answers ``invalid``,
and the game goes on (``--numbers-only`` restricts the arg-max to number tokens instead).
Prints accuracy / success / mean rounds (see :mod:`fairseq_acvi.guess_number`).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import torch

from fairseq_acvi import guess_number as gn


class ModelPlayer(gn.Player):
    """A :class:`~fairseq_acvi.guess_number.Player` backed by a ``babi_qa`` model.

    ``task.build_net_input(stories, questions)`` turns plain-text stories (lists of sentences,
    oldest first) and questions into the model's ``net_input``; ``model.answer_log_probs(**net_input)``
    gives (B, V) log-probabilities over ``task.target_dictionary``.
    """

    def __init__(self, task, model, style: str = "joint", memory_size: int = 50,
                 numbers_only: bool = False, batch_size: int = 256):
        if memory_size < 1:
            raise ValueError(f"--memory-size must be >= 1, got {memory_size}")
        self.task, self.model, self.style = task, model, style
        self.memory_size, self.batch_size = memory_size, batch_size
        d = task.target_dictionary
        self.symbols = [d[i] for i in range(len(d))]
        is_num = torch.tensor([gn.is_number(s) for s in self.symbols])
        if numbers_only and not bool(is_num.any()):
            raise ValueError("--numbers-only: the model's dictionary has no number tokens")
        self.mask = None if not numbers_only else torch.where(is_num, 0.0, float("-inf"))

    def stories(self, histories: Sequence[gn.History]) -> List[List[str]]:
        """The memory of each history: its last ``memory_size`` statement lines."""
        return [gn.story_lines(h, self.style)[-self.memory_size:] for h in histories]

    @torch.no_grad()
    def guess_batch(self, histories: Sequence[gn.History]) -> List[str]:
        out: List[str] = []
        stories = self.stories(histories)
        for i in range(0, len(stories), self.batch_size):
            chunk = stories[i:i + self.batch_size]
            net_input = self.task.build_net_input(chunk, [gn.QUESTION] * len(chunk))
            lprobs = self.model.answer_log_probs(**net_input).float()  # (B, V)
            if lprobs.shape != (len(chunk), len(self.symbols)):
                raise RuntimeError(f"answer_log_probs gave shape {tuple(lprobs.shape)}, expected "
                                   f"({len(chunk)}, {len(self.symbols)})")
            if self.mask is not None:
                lprobs = lprobs + self.mask.to(lprobs.device)
            out.extend(self.symbols[j] for j in lprobs.argmax(dim=-1).tolist())
        return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--path", default=None, help="checkpoint of a memn2n / t_memn2n model")
    p.add_argument("--scripted", default=None, choices=sorted(gn.PLAYERS),
                   help="play a scripted student instead of a checkpoint (reference rows)")
    p.add_argument("--data", required=True, help="the game folder the model was trained on")
    p.add_argument("--games", type=int, default=100, help="games to play (fresh targets)")
    p.add_argument("--seed", type=int, default=1, help="seed of the targets (and of t-MEM-NN sampling)")
    p.add_argument("--max-tries", type=int, default=100, help="a game is lost after this many guesses")
    p.add_argument("--mc-samples", type=int, default=None,
                   help="t-MEM-NN: draws S averaged at inference, or 0 for the posterior mean "
                        "(default: the checkpoint's)")
    p.add_argument("--memory-size", type=int, default=None,
                   help="statement lines the model reads (default: the checkpoint's memory size)")
    p.add_argument("--low", type=int, default=None, help="range (default: DIR/guess_number.json)")
    p.add_argument("--high", type=int, default=None)
    p.add_argument("--style", choices=gn.STYLES, default=None,
                   help="dialogue style (default: DIR/guess_number.json)")
    p.add_argument("--numbers-only", action="store_true",
                   help="arg-max over number tokens only (no invalid outputs possible)")
    p.add_argument("--transcripts", type=int, default=0, help="print the first K games in full")
    p.add_argument("--batch-size", type=int, default=256, help="games fed to the model at once")
    p.add_argument("--cpu", action="store_true", help="run on CPU even if CUDA is available")
    p.add_argument("--label", default=None, help="name printed in the result line / JSON")
    p.add_argument("--results-json", default=None, help="also write the metrics to this file")
    args = p.parse_args(argv)
    if (args.path is None) == (args.scripted is None):
        p.error("give exactly one of --path CKPT and --scripted PLAYER")
    for opt in ("games", "max_tries", "batch_size"):
        if getattr(args, opt) < 1:
            p.error(f"--{opt.replace('_', '-')} must be >= 1")
    if args.mc_samples is not None and args.mc_samples < 0:
        p.error(f"--mc-samples must be an integer >= 0 (0: the posterior mean), got {args.mc_samples}")
    return args


def game_settings(args) -> dict:
    """Range and style: ``DIR/guess_number.json`` overridden by the command-line options."""
    meta = {}
    meta_path = Path(args.data) / "guess_number.json"
    if meta_path.is_file():
        with open(meta_path) as f:
            meta = json.load(f)
    out = {k: getattr(args, k) if getattr(args, k) is not None else meta.get(k)
           for k in ("low", "high", "style")}
    missing = [k for k, v in out.items() if v is None]
    if missing and missing != ["style"]:
        raise SystemExit(f"error: {meta_path} not found and --{'/--'.join(missing)} not given")
    out["style"] = out["style"] or "joint"
    gn.check_range(out["low"], out["high"])
    return out


def _cfg_get(cfg, key):
    """First value of ``key`` in the checkpoint's model or task config (None if absent)."""
    for section in ("model", "task"):
        sec = getattr(cfg, section, None)
        if sec is not None and key in sec and sec[key] is not None:
            return sec[key]
    return None


def load(args):
    """(task, model, cfg) from the checkpoint, with the data path and S overridden."""
    import fairseq_acvi  # noqa: F401  (registers the plugin and its checkpoint allow-list)
    from fairseq import checkpoint_utils

    overrides = {"data": str(args.data)}
    if args.mc_samples is not None:
        overrides["mc_samples"] = args.mc_samples
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [args.path], arg_overrides=overrides)
    if args.mc_samples is not None and str(_cfg_get(cfg, "mc_samples")) != str(args.mc_samples):
        raise SystemExit(f"error: --mc-samples given, but the model in {args.path} "
                         f"({cfg.model._name}) has no mc_samples option")
    model = models[0]
    if not args.cpu and torch.cuda.is_available():
        model = model.cuda()
    return task, model.eval(), cfg


def format_metrics(m: gn.Metrics, label: str) -> str:
    rounds = "n/a" if math.isnan(m.rounds) else f"{m.rounds:.2f}"
    return (f"{label}: games {m.games}  guesses {m.guesses}  accuracy {100 * m.accuracy:.1f}%  "
            f"(per-game {100 * m.accuracy_per_game:.1f}%)  success {100 * m.success:.1f}%  "
            f"rounds {rounds}  invalid outputs {m.invalid}  position {m.position:.2f}  "
            f"off-centre {m.off_centre:.2f}  on a bound {100 * m.on_bound:.1f}%")


def main(argv: Optional[Sequence[str]] = None):
    args = parse_args(argv)
    settings = game_settings(args)
    low, high, style = settings["low"], settings["high"], settings["style"]
    torch.manual_seed(args.seed)
    if args.scripted:
        player, s, memory_size = gn.make_player(args.scripted, random.Random(args.seed + 1)), None, None
        label = args.label or f"scripted {args.scripted}"
    else:
        task, model, cfg = load(args)
        memory_size = int(args.memory_size or _cfg_get(cfg, "memory_size") or 50)
        player = ModelPlayer(task, model, style, memory_size, args.numbers_only, args.batch_size)
        unknown = [n for n in range(low, high + 1) if str(n) not in player.symbols]
        if unknown:
            print(f"warning: {len(unknown)} numbers of [{low}, {high}] are not in the model's "
                  f"dictionary and can never be guessed (e.g. {unknown[:5]})", file=sys.stderr)
        s = _cfg_get(cfg, "mc_samples")
        label = args.label or Path(args.path).name
    rng = random.Random(args.seed)
    targets = [rng.randint(low, high) for _ in range(args.games)]
    records = gn.play_games(player, targets, low, high, args.max_tries)
    for rec in records[:args.transcripts]:
        print(gn.transcript(rec))
    metrics = gn.summarize(records)
    print(format_metrics(metrics, label + (f" (S={s})" if s is not None else "")))
    if args.results_json:
        with open(args.results_json, "w") as f:
            json.dump({"label": label, "checkpoint": args.path, "scripted": args.scripted,
                       "data": str(args.data), "low": low, "high": high, "style": style, "seed": args.seed,
                       "mc_samples": s, "memory_size": memory_size,
                       "numbers_only": args.numbers_only, **metrics.as_dict()}, f, indent=1)
            f.write("\n")
    return metrics


if __name__ == "__main__":
    main()
