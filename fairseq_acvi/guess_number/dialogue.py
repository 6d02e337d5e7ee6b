""""Guess the number" games as bAbI v1.2 dialogue, written and read back with every line checked
(docs/method.md §4.4; the game itself: :mod:`fairseq_acvi.guess_number.game`).

Dialogue as bAbI v1.2 text (one story per game; ids restart at 1; question lines are not memories):

    1 select a number between 0 and 10 .
    2 what is your guess ?<TAB>5<TAB>1
    3 i guess 5 larger .
    4 what is your guess ?<TAB>8<TAB>1 3
    5 i guess 8 smaller .
    6 what is your guess ?<TAB>7<TAB>3 5

The opening line states the range and is the supporting fact of a bound no hint has tightened yet;
otherwise the supporting facts are the round lines that set the current ``lo`` and ``hi`` (the
earliest line that reached the current value). In the ``split`` style a round is two lines,
``i guess 5 .`` and ``larger .``, and both lines of a bound-setting round are supporting facts.
The game's winning round (the last question's answer) is not written as a line. Numbers are always
single whitespace-free tokens (``low >= 0``), so any bAbI tokenizer keeps them whole.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Tuple

from fairseq_acvi.data.text_lines import read_text_lines
from fairseq_acvi.guess_number.game import (CORRECT, INVALID, LARGER, SMALLER, Bounds, GameRecord,
                                            History, Round, implied_bounds, is_number)

QUESTION = "what is your guess ?"
STYLES = ("joint", "split")
_OPENING = re.compile(r"^select a number between (\S+) and (\S+) \.$")
_JOINT = re.compile(r"^i guess (\S+) (larger|smaller) \.$")
_SPLIT_GUESS = re.compile(r"^i guess (\S+) \.$")
_SPLIT_HINT = re.compile(r"^(larger|smaller) \.$")


# ----------------------------------------------------------------------------- dialogue as text
def opening_line(low: int, high: int) -> str:
    return f"select a number between {low} and {high} ."


def round_lines(r: Round, style: str = "joint") -> List[str]:
    """The statement line(s) of a finished, non-winning round."""
    if style == "joint":
        return [f"i guess {r.guess} {r.hint} ."]
    if style == "split":
        return [f"i guess {r.guess} .", f"{r.hint} ."]
    raise ValueError(f"--style: unknown dialogue style {style!r}; choose from {STYLES}")


def story_lines(history: History, style: str = "joint") -> List[str]:
    """The statements a reader of ``history`` has heard, oldest first (opening + every round)."""
    out = [opening_line(history.low, history.high)]
    for r in history.rounds:
        out.extend(round_lines(r, style))
    return out


def _round_line_ids(k: int, style: str) -> List[int]:
    """bAbI line ids of the statement line(s) of round ``k`` (0-based) in a :func:`babi_story`."""
    per_round = len(round_lines(Round("0", LARGER), style))
    first = 3 + k * (1 + per_round)  # line 1 opening, then per round: question + statements
    return list(range(first, first + per_round))


def support_ids(bounds: Bounds, style: str = "joint") -> List[int]:
    """Supporting facts of a question: the lines that set ``bounds`` (1 = the opening line)."""
    return sorted({i for r in (bounds.lo_round, bounds.hi_round)
                   for i in ([1] if r is None else _round_line_ids(r, style))})


def babi_story(record: GameRecord, style: str = "joint") -> List[str]:
    """One game as bAbI v1.2 lines (without newlines): a question before every guess.

    The answer is the guess that was played; supporting facts are the line ids that define the
    bounds implied by the history (module doc). Only games whose guesses are all number tokens can
    be written (an answer must be a word of the game).
    """
    lines = [f"1 {opening_line(record.low, record.high)}"]
    for k, r in enumerate(record.rounds):
        if not is_number(r.guess):
            raise ValueError(f"cannot write a non-number guess {r.guess!r} as a bAbI answer")
        b = implied_bounds(record.low, record.high, record.rounds[:k])
        support = " ".join(map(str, support_ids(b, style)))
        lines.append(f"{len(lines) + 1} {QUESTION}\t{r.guess}\t{support}")
        if r.hint == CORRECT:
            break
        for text in round_lines(r, style):
            lines.append(f"{len(lines) + 1} {text}")
    return lines


def write_babi(records: Iterable[GameRecord], path: Path, style: str = "joint") -> int:
    """Write games to ``path`` in bAbI format; returns the number of questions written."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for rec in records:
            for line in babi_story(rec, style):
                f.write(line + "\n")
                n += "\t" in line
    return n


# --------------------------------------------------------------------------- reading back (check)
@dataclass
class ParsedQA:
    """One question read back: the history before it, the answer and its supporting-fact ids."""

    history: History
    answer: str
    support: List[int]
    lineno: int


def read_babi_games(path: Path, style: str = "joint") -> List[List[ParsedQA]]:
    """Parse a file written by :func:`write_babi` and check every line; one list of QAs per game.

    Checks: ids start at 1 and increase by 1; the opening line comes first and states a valid range;
    every statement is a well-formed round line whose hint is the one the current bounds allow
    (i.e. consistent with some target); every question's answer is a number inside the bounds
    implied by the history (the recorded student never guesses out of bounds), its supporting facts
    are exactly the lines defining those bounds, and a question is followed by its guess's round
    line(s) with the same guess. Raises ValueError naming ``path:line`` on the first problem.
    """
    games: List[List[ParsedQA]] = []
    rounds: List[Round] = []
    low = high = None
    expect_id = 1
    pending: Optional[Tuple[str, int]] = None  # (guess of last question, its line) awaiting round line
    split_guess: Optional[str] = None

    def fail(lineno: int, msg: str):
        raise ValueError(f"{path}:{lineno}: {msg}")

    def close_round(lineno: int, guess: str, hint: str):
        nonlocal pending
        if pending is None or pending[0] != guess:
            fail(lineno, f"round line 'i guess {guess}' does not follow a question answered {guess}")
        b = implied_bounds(low, high, rounds)
        g = int(guess)
        if hint == INVALID or (hint == LARGER and g >= b.hi) or (hint == SMALLER and g <= b.lo):
            fail(lineno, f"hint {hint!r} for guess {g} is impossible with bounds [{b.lo}, {b.hi}]")
        rounds.append(Round(guess, hint))
        pending = None

    for lineno, line in enumerate(read_text_lines(path, newline="any"), 1):
        m = re.match(r"^(\d+) (.*)$", line)
        if not m:
            fail(lineno, f"expected 'ID text', got {line!r}")
        nid, text = int(m.group(1)), m.group(2)
        if nid == 1:
            if split_guess is not None:
                fail(lineno, "previous game ended between a guess line and its hint line")
            mo = _OPENING.match(text)
            if not mo or not (is_number(mo.group(1)) and is_number(mo.group(2))):
                fail(lineno, f"a game must open with {opening_line('LOW', 'HIGH')!r}, got {text!r}")
            low, high = int(mo.group(1)), int(mo.group(2))
            if high <= low:
                fail(lineno, f"empty range [{low}, {high}]")
            games.append([])
            rounds, pending, expect_id = [], None, 2
            continue
        if nid != expect_id:
            fail(lineno, f"line id {nid}, expected {expect_id} (or 1 to start a new game)")
        expect_id += 1
        if "\t" in text:
            parts = text.split("\t")
            if len(parts) != 3 or parts[0] != QUESTION:
                fail(lineno, f"question line must be '{QUESTION}<TAB>answer<TAB>ids'")
            if pending is not None or split_guess is not None:
                fail(lineno, "question before the previous guess got its hint")
            answer, sup = parts[1], parts[2].split()
            if not all(s.isdigit() for s in sup):
                fail(lineno, f"supporting facts must be line ids, got {parts[2]!r}")
            b = implied_bounds(low, high, rounds)
            if not b.contains(answer):
                fail(lineno, f"answer {answer!r} outside the bounds [{b.lo}, {b.hi}] implied "
                             "by the history")
            want = [str(i) for i in support_ids(b, style)]
            if sup != want:
                fail(lineno, f"supporting facts {sup}, expected {want}")
            games[-1].append(ParsedQA(History(low, high, list(rounds)), answer,
                                      [int(s) for s in sup], lineno))
            pending = (answer, lineno)
            continue
        if style == "joint":
            mj = _JOINT.match(text)
            if not mj:
                fail(lineno, f"expected 'i guess N larger|smaller .', got {text!r}")
            close_round(lineno, mj.group(1), mj.group(2))
        elif split_guess is None:
            ms = _SPLIT_GUESS.match(text)
            if not ms:
                fail(lineno, f"expected 'i guess N .', got {text!r}")
            if pending is None or pending[0] != ms.group(1):
                fail(lineno, f"'i guess {ms.group(1)}' does not follow a question answered "
                             f"{ms.group(1)}")
            split_guess = ms.group(1)
        else:
            mh = _SPLIT_HINT.match(text)
            if not mh:
                fail(lineno, f"expected 'larger .' or 'smaller .', got {text!r}")
            guess, split_guess = split_guess, None
            close_round(lineno, guess, mh.group(1))
    if split_guess is not None:
        raise ValueError(f"{path}: file ends between a guess line and its hint line")
    if not games:
        raise ValueError(f"{path}: no games")
    return games
