"""A deterministic toy parallel corpus for the data tool's and the quick start's tests.

The "translation" maps every source word ``w<k>`` to the target word ``W<k>`` and reverses the word
order: a task an attention model learns in a few hundred pairs, written as a researcher's files
``DIR/{train,valid,test}.{en,de}``.
"""
import random
from pathlib import Path

VOCAB = 24


def toy_pairs(n: int, seed: int):
    """``n`` (source, target) sentence pairs of 3-8 words, the same for the same seed."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.randrange(VOCAB) for _ in range(rng.randint(3, 8))]
        pairs.append((" ".join(f"w{k}" for k in words), " ".join(f"W{k}" for k in reversed(words))))
    return pairs


def write_toy_corpus(folder: Path, sizes=None, src="en", tgt="de") -> Path:
    """Write ``folder/SPLIT.{src,tgt}`` for each split of ``sizes`` ({split: pairs}; default train 300,
    valid 40, test 40); returns ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for k, (split, n) in enumerate((sizes or {"train": 300, "valid": 40, "test": 40}).items()):
        pairs = toy_pairs(n, seed=k + 1)
        for lang, side in ((src, 0), (tgt, 1)):
            (folder / f"{split}.{lang}").write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    return folder
