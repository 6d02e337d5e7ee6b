"""The published numbers the reports print beside ours, in one place (docs/method.md §5 gives the
sources and how each number was read).

* bAbI, D Table 2 (single-task) and D Table 10 (joint): test accuracy % per task for MemN2N,
  t-MEM-NN with S = 1 and with S = 10 posterior draws (``BABI_SINGLE``, ``BABI_JOINT``), and the
  task names (``BABI_TASK_NAMES``).
* Guess the number, D Tables 16-17: (low, high, training games) -> player -> (accuracy %,
  success %, rounds) (``GUESS_NUMBER``).
* Video captioning, P Table 3 (MSVD): method -> (metric, split) -> score (``CAPTIONING_TABLE3``).
"""
from typing import Dict, Tuple

BABI_SINGLE: Dict[int, Tuple[int, int, int]] = {
    1: (100, 100, 100), 2: (84, 77, 84), 3: (55, 55, 57), 4: (96, 94, 96), 5: (88, 87, 88),
    6: (92, 93, 97), 7: (83, 81, 85), 8: (87, 87, 90), 9: (90, 88, 92), 10: (78, 81, 84),
    11: (85, 98, 98), 12: (100, 100, 100), 13: (89, 93, 95), 14: (92, 92, 96), 15: (100, 100, 100),
    16: (45, 45, 46), 17: (51, 51, 53), 18: (87, 89, 91), 19: (12, 12, 14), 20: (100, 100, 100)}

# the dissertation's text, §6.5.3
BABI_JOINT: Dict[int, Tuple[int, int, int]] = {
    1: (99, 100, 100), 2: (86, 61, 79), 3: (71, 45, 60), 4: (85, 77, 85), 5: (86, 82, 86),
    6: (96, 99, 100), 7: (84, 84, 85), 8: (89, 88, 89), 9: (96, 99, 99), 10: (92, 91, 95),
    11: (94, 90, 91), 12: (98, 99, 100), 13: (97, 93, 98), 14: (88, 91, 96), 15: (98, 97, 100),
    16: (46, 46, 48), 17: (55, 55, 58), 18: (59, 67, 71), 19: (10, 14, 17), 20: (100, 100, 100)}

BABI_TASK_NAMES: Dict[int, str] = {
    1: "single supporting fact", 2: "two supporting facts", 3: "three supporting facts",
    4: "two arg. relations", 5: "three arg. relations", 6: "yes/no questions", 7: "counting",
    8: "lists/sets", 9: "simple negation", 10: "indefinite knowledge", 11: "basic coreference",
    12: "conjunction", 13: "compound coreference", 14: "time reasoning", 15: "basic deduction",
    16: "basic induction", 17: "positional reasoning", 18: "size reasoning", 19: "path finding",
    20: "agent's motivations"}

GUESS_NUMBER: Dict[Tuple[int, int, int], Dict[str, Tuple[float, float, float]]] = {
    (0, 10, 100): {"memn2n": (77, 86, 4.3), "t_memn2n_S1": (87, 95, 3.9), "t_memn2n_S10": (91, 98, 3.6)},
    (0, 10, 1000): {"memn2n": (99, 100, 4.2), "t_memn2n_S1": (100, 100, 3.8), "t_memn2n_S10": (100, 100, 3.6)},
    (0, 10, 10000): {"memn2n": (97, 98, 4.0), "t_memn2n_S1": (99, 100, 3.8), "t_memn2n_S10": (100, 100, 3.7)},
    (0, 100, 100): {"memn2n": (17, 20, 7.7), "t_memn2n_S1": (19, 28, 5.1), "t_memn2n_S10": (21, 31, 3.2)},
    (0, 100, 1000): {"memn2n": (30, 45, 8.7), "t_memn2n_S1": (49, 61, 8.2), "t_memn2n_S10": (55, 72, 7.7)},
    (0, 100, 10000): {"memn2n": (63, 68, 12.6), "t_memn2n_S1": (78, 89, 9.1), "t_memn2n_S10": (85, 97, 8.5)},
}

_TABLE3_ROWS = {  # method: ROUGE-L valid, ROUGE-L test, CIDEr valid, CIDEr test
    "SA": (0.5628, 0.5701, 0.4575, 0.421),
    "Structured": (0.5804, 0.5712, 0.5071, 0.4283),
    "Variational": (0.5809, 0.5716, 0.5103, 0.4289),
    "VED": (0.5839, 0.5749, 0.5421, 0.4298),
    "ACVI": (0.5968, 0.5766, 0.6039, 0.4375),
}
CAPTIONING_TABLE3: Dict[str, Dict[Tuple[str, str], float]] = {
    m: dict(zip([("ROUGE-L", "valid"), ("ROUGE-L", "test"), ("CIDEr", "valid"), ("CIDEr", "test")], v))
    for m, v in _TABLE3_ROWS.items()
}
