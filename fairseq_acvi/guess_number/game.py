""""Guess the number": the game, its teacher, scripted players and their metrics (docs/method.md §4.4).

A teacher picks an integer target in ``[low, high]``. Each round the student says a guess (a token);
the teacher answers ``larger`` (target > guess), ``smaller`` (target < guess) or ``correct``; a token
that is not a number gets ``invalid`` and carries no information. A game ends when the guess is
correct or after ``max_tries`` guesses (100 in the seed, D §6.6).

The *bounds implied by the history* are the integers still possible given every hint so far::

    lo = max(low,  {g + 1 : g answered "larger"})      hi = min(high, {g - 1 : g answered "smaller"})

A guess is *accurate* when it is a number in ``[lo, hi]`` (out-of-bounds and non-number guesses are
not). Metrics over a set of played games (D §6.6): accuracy = accurate guesses / guesses (micro
average; the per-game mean is reported too), success = share of games won within ``max_tries``,
rounds = mean number of guesses in won games. A diagnostic beside them says *where* in the bounds the
accurate guesses fall: for a guess ``g`` in ``[lo, hi]`` with ``hi > lo``, its position is
``r = (g - lo) / (hi - lo)``; ``position`` is the mean of ``r`` (0.5 = no lean to either bound) and
``off_centre`` the mean of ``|2r - 1|`` (0 = the midpoint, as bisection; 1 = a bound; 0.56 expected
for the uniform-random student on [0, 100]) and ``on_bound`` the share with ``r`` in {0, 1}. A player
that guesses near the bounds needs more rounds.

Everything here is model-agnostic: a :class:`Player` maps histories to guess tokens, and the same
loop (:func:`play_games`) runs the scripted players of the data generator and the tests and the
trained memory network of ``fairseq_acvi.cli.guess_number``.
The games as bAbI-format dialogue: :mod:`fairseq_acvi.guess_number.dialogue`.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

LARGER, SMALLER, CORRECT, INVALID = "larger", "smaller", "correct", "invalid"
HINTS = (LARGER, SMALLER, CORRECT, INVALID)
_NUMBER = re.compile(r"^(0|[1-9][0-9]*)$")


def is_number(token: str) -> bool:
    """True for a non-negative integer written as one token without sign or leading zeros."""
    return bool(_NUMBER.match(token))


def check_range(low: int, high: int) -> None:
    """Raise ValueError unless ``0 <= low < high`` (numbers must stay single sign-free tokens)."""
    if low < 0 or high <= low:
        raise ValueError(f"--low/--high: need 0 <= low < high, got low={low} high={high}")


@dataclass(frozen=True)
class Round:
    """One exchange: the student's guess token and the teacher's hint (one of :data:`HINTS`)."""

    guess: str
    hint: str


@dataclass
class History:
    """What a player may see: the range and the rounds so far (never the target)."""

    low: int
    high: int
    rounds: List[Round] = field(default_factory=list)


@dataclass(frozen=True)
class Bounds:
    """Bounds implied by a history: the inclusive interval ``[lo, hi]`` of still-possible targets.

    ``lo_round`` / ``hi_round``: index (0-based) of the earliest round whose hint set the current
    ``lo`` / ``hi``; None while that bound is still the range's own end.
    """

    lo: int
    hi: int
    lo_round: Optional[int]
    hi_round: Optional[int]

    def contains(self, token: str) -> bool:
        return is_number(token) and self.lo <= int(token) <= self.hi

    @property
    def size(self) -> int:
        return self.hi - self.lo + 1


def teacher_hint(target: int, guess: str) -> str:
    """The teacher's answer to ``guess`` for the true ``target`` (``invalid`` for a non-number)."""
    if not is_number(guess):
        return INVALID
    g = int(guess)
    return CORRECT if g == target else (LARGER if target > g else SMALLER)


def implied_bounds(low: int, high: int, rounds: Sequence[Round]) -> Bounds:
    """Bounds implied by the hints of ``rounds`` on the range ``[low, high]`` (see module doc).

    A hint that does not tighten a bound (an out-of-bounds guess) changes nothing; ``invalid``
    rounds carry no information. ``correct`` pins the interval to the guess.
    """
    lo, hi, lo_round, hi_round = low, high, None, None
    for i, r in enumerate(rounds):
        if r.hint == INVALID:
            continue
        g = int(r.guess)
        if r.hint in (LARGER, CORRECT) and g + (r.hint == LARGER) > lo:
            lo, lo_round = g + (r.hint == LARGER), i
        if r.hint in (SMALLER, CORRECT) and g - (r.hint == SMALLER) < hi:
            hi, hi_round = g - (r.hint == SMALLER), i
    return Bounds(lo, hi, lo_round, hi_round)


def bisect_rounds_bound(low: int, high: int) -> int:
    """Worst-case guesses of the bisecting player on ``[low, high]``: ⌈log2(n + 1)⌉, n = high-low+1."""
    return math.ceil(math.log2(high - low + 2))


# --------------------------------------------------------------------------------------- players
class Player:
    """Maps histories to guess tokens. Subclasses override :meth:`guess` or :meth:`guess_batch`."""

    def guess(self, history: History) -> str:
        return self.guess_batch([history])[0]

    def guess_batch(self, histories: Sequence[History]) -> List[str]:
        return [self.guess(h) for h in histories]


class RandomPlayer(Player):
    """Guesses uniformly at random inside the implied bounds (the training-data student, §4.4)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def guess(self, history: History) -> str:
        b = implied_bounds(history.low, history.high, history.rounds)
        return str(self.rng.randint(b.lo, b.hi))


class BisectPlayer(Player):
    """Guesses the midpoint ``(lo + hi) // 2`` of the implied bounds."""

    def guess(self, history: History) -> str:
        b = implied_bounds(history.low, history.high, history.rounds)
        return str((b.lo + b.hi) // 2)


class LowerBoundPlayer(Player):
    """Guesses the lower implied bound ``lo`` (a linear search: target − low + 1 guesses)."""

    def guess(self, history: History) -> str:
        return str(implied_bounds(history.low, history.high, history.rounds).lo)


class ConstantPlayer(Player):
    """Always says the same token (e.g. a non-number, to exercise the invalid-output path)."""

    def __init__(self, token: str):
        self.token = token

    def guess(self, history: History) -> str:
        return self.token


PLAYERS = {"random": RandomPlayer, "bisect": BisectPlayer, "lower": LowerBoundPlayer}


def make_player(name: str, rng: random.Random) -> Player:
    """A scripted player by name (``random`` | ``bisect`` | ``lower``)."""
    if name not in PLAYERS:
        raise ValueError(f"--player: unknown player {name!r}; choose from {sorted(PLAYERS)}")
    return RandomPlayer(rng) if name == "random" else PLAYERS[name]()


# ------------------------------------------------------------------------------------- game loop
@dataclass
class GameRecord:
    """A played game: target, rounds, and for each guess whether it lay inside the implied bounds."""

    low: int
    high: int
    target: int
    rounds: List[Round] = field(default_factory=list)
    accurate: List[bool] = field(default_factory=list)

    @property
    def won(self) -> bool:
        return bool(self.rounds) and self.rounds[-1].hint == CORRECT

    @property
    def invalid(self) -> int:
        return sum(r.hint == INVALID for r in self.rounds)

    def history(self, n_rounds: Optional[int] = None) -> History:
        return History(self.low, self.high, list(self.rounds[:n_rounds]))


def play_games(player: Player, targets: Sequence[int], low: int, high: int,
               max_tries: int = 100) -> List[GameRecord]:
    """Play one game per target, all games in lock-step (one :meth:`Player.guess_batch` per round).

    Returns the records in the order of ``targets``. A game stops when won or after ``max_tries``.
    """
    check_range(low, high)
    for t in targets:
        if not low <= t <= high:
            raise ValueError(f"target {t} outside [{low}, {high}]")
    if max_tries < 1:
        raise ValueError(f"--max-tries must be >= 1, got {max_tries}")
    games = [GameRecord(low, high, t) for t in targets]
    for _ in range(max_tries):
        active = [g for g in games if not g.won]
        if not active:
            break
        guesses = player.guess_batch([g.history() for g in active])
        if len(guesses) != len(active):
            raise RuntimeError(f"player returned {len(guesses)} guesses for {len(active)} games")
        for g, token in zip(active, guesses):
            token = str(token)
            g.accurate.append(implied_bounds(low, high, g.rounds).contains(token))
            g.rounds.append(Round(token, teacher_hint(g.target, token)))
    return games


@dataclass(frozen=True)
class Metrics:
    """Game metrics (D §6.6); fractions in [0, 1]; ``rounds`` is NaN when no game was won."""

    games: int
    guesses: int
    accuracy: float          # accurate guesses / all guesses
    accuracy_per_game: float  # mean over games of the per-game accuracy
    success: float
    rounds: float
    invalid: int             # guesses that were not number tokens
    position: float = float("nan")    # mean r = (g - lo) / (hi - lo) of accurate guesses, hi > lo
    off_centre: float = float("nan")  # mean |2r - 1| over the same guesses (0 midpoint, 1 a bound)
    on_bound: float = float("nan")    # share of the same guesses with r in {0, 1}

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def summarize(records: Sequence[GameRecord]) -> Metrics:
    if not records:
        raise ValueError("no games to summarize")
    guesses = sum(len(r.accurate) for r in records)
    won = [r for r in records if r.won]
    positions = [p for r in records for p in guess_positions(r)]
    return Metrics(
        games=len(records),
        guesses=guesses,
        accuracy=sum(sum(r.accurate) for r in records) / guesses,
        accuracy_per_game=sum(sum(r.accurate) / len(r.accurate) for r in records) / len(records),
        success=len(won) / len(records),
        rounds=sum(len(r.rounds) for r in won) / len(won) if won else float("nan"),
        invalid=sum(r.invalid for r in records),
        position=sum(positions) / len(positions) if positions else float("nan"),
        off_centre=sum(abs(2 * p - 1) for p in positions) / len(positions) if positions else float("nan"),
        on_bound=sum(p in (0.0, 1.0) for p in positions) / len(positions) if positions else float("nan"),
    )


def guess_positions(record: GameRecord) -> List[float]:
    """``r = (g - lo) / (hi - lo)`` of each accurate guess whose bounds hold two or more numbers."""
    return [(int(r.guess) - b.lo) / (b.hi - b.lo)
            for r, ok, b in zip(record.rounds, record.accurate, bounds_before_rounds(record))
            if ok and b.hi > b.lo]


def bounds_before_rounds(record: GameRecord) -> List[Bounds]:
    """The implied bounds the player saw before each of its guesses."""
    return [implied_bounds(record.low, record.high, record.rounds[:i]) for i in range(len(record.rounds))]


def transcript(record: GameRecord) -> str:
    """Human-readable play-by-play of one game (bounds shown before each guess)."""
    lines = [f"target {record.target} in [{record.low}, {record.high}]"]
    for i, (r, ok, b) in enumerate(zip(record.rounds, record.accurate, bounds_before_rounds(record))):
        bounds = f"[{b.lo}, {b.hi}]"
        lines.append(f"  round {i + 1:3d}  bounds {bounds:<10}  guess {r.guess:>6}  "
                     f"{'in bounds' if ok else 'OUT OF BOUNDS'}  -> {r.hint}")
    acc = sum(record.accurate) / max(1, len(record.accurate))
    lines.append(f"  {'won' if record.won else 'lost'} after {len(record.rounds)} rounds, "
                 f"accuracy {acc:.2f}")
    return "\n".join(lines)
