#!/usr/bin/env python
"""Generate "Guess the number" dialogues in bAbI v1.2 format (docs/method.md §4.4, D §6.6).

Writes into ``--out``::

    qa{ID}_{NAME}_train.txt   --train-games games (100 / 1k / 10k in the seed)
    qa{ID}_{NAME}_test.txt    --test-games games (100)
    guess_number.json         range, style, seeds, counts (read by ``fairseq_acvi.cli.guess_number``)

so that ``--task babi_qa --babi-tasks ID`` can train on the folder. Targets are uniform on
``[--low, --high]``; the recorded student is ``--player`` (``random``: uniform inside the bounds
implied by the history, the decision of docs/method.md §4.4; ``bisect``: midpoint). One question per round; see
:mod:`fairseq_acvi.guess_number` for the line format and the supporting facts. Every file is
read back and checked line by line before the command reports success.

Example::

    python data_scripts/make_guess_number.py --out data-bin/guess_number/r0-10_1k \\
        --low 0 --high 10 --train-games 1000
"""
import argparse
import json
import random
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from fairseq_acvi import guess_number as gn  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--low", type=int, default=0, help="smallest possible target (>= 0)")
    p.add_argument("--high", type=int, default=10, help="largest possible target")
    p.add_argument("--train-games", type=int, default=1000, help="games in the training file")
    p.add_argument("--test-games", type=int, default=100, help="games in the test file")
    p.add_argument("--player", default="random", choices=sorted(gn.PLAYERS),
                   help="the student whose guesses are recorded as answers")
    p.add_argument("--style", default="joint", choices=gn.STYLES,
                   help="joint: 'i guess 5 larger .'; split: 'i guess 5 .' + 'larger .'")
    p.add_argument("--max-tries", type=int, default=100, help="a game stops after this many guesses")
    p.add_argument("--seed", type=int, default=1, help="seed of targets and random guesses")
    p.add_argument("--task-id", type=int, default=1, help="N in qa{N}_{name}_*.txt (--babi-tasks N)")
    p.add_argument("--name", default="guess-number", help="name in qa{N}_{name}_*.txt")
    args = p.parse_args(argv)
    try:
        gn.check_range(args.low, args.high)
    except ValueError as e:
        p.error(str(e))
    for opt in ("train_games", "test_games", "max_tries", "task_id"):
        if getattr(args, opt) < 1:
            p.error(f"--{opt.replace('_', '-')} must be >= 1")
    if not all(c.isalnum() or c == "-" for c in args.name):
        p.error("--name: letters, digits and '-' only")
    return args


def generate(n_games: int, args, rng: random.Random):
    """Play ``n_games`` games of the recorded student against fresh uniform targets."""
    targets = [rng.randint(args.low, args.high) for _ in range(n_games)]
    return gn.play_games(gn.make_player(args.player, rng), targets, args.low, args.high,
                         args.max_tries)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"low": args.low, "high": args.high, "style": args.style, "player": args.player,
            "max_tries": args.max_tries, "seed": args.seed, "task_id": args.task_id,
            "name": args.name, "splits": {}}
    for split, n_games, seed in (("train", args.train_games, args.seed),
                                 ("test", args.test_games, args.seed + 1_000_003)):
        records = generate(n_games, args, random.Random(seed))
        path = out / f"qa{args.task_id}_{args.name}_{split}.txt"
        n_q = gn.write_babi(records, path, args.style)
        games = gn.read_babi_games(path, args.style)  # raises with file:line on any bad line
        if len(games) != n_games or sum(map(len, games)) != n_q:
            raise RuntimeError(f"{path}: read back {len(games)} games / {sum(map(len, games))} "
                               f"questions, wrote {n_games} / {n_q}")
        m = gn.summarize(records)
        meta["splits"][split] = {"games": n_games, "questions": n_q, "won": round(m.success * n_games),
                                 "mean_rounds": m.rounds, "seed": seed}
        print(f"{path}: {n_games} games, {n_q} questions, won {m.success:.0%}, "
              f"mean rounds {m.rounds:.2f}")
    with open(out / "guess_number.json", "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
