""""Guess the number" (docs/method.md §4.4): the game, its teacher, scripted players and metrics
(:mod:`~fairseq_acvi.guess_number.game`), and the games as bAbI-format dialogue, written and read
back (:mod:`~fairseq_acvi.guess_number.dialogue`). The names of both are available here."""
from fairseq_acvi.guess_number.game import (  # noqa: F401
    LARGER, SMALLER, CORRECT, INVALID, HINTS, is_number, check_range, Round, History, Bounds,
    teacher_hint, implied_bounds, bisect_rounds_bound, Player, RandomPlayer, BisectPlayer,
    LowerBoundPlayer, ConstantPlayer, PLAYERS, make_player, GameRecord, play_games, Metrics,
    summarize, guess_positions, bounds_before_rounds, transcript,
)
from fairseq_acvi.guess_number.dialogue import (  # noqa: F401
    QUESTION, STYLES, opening_line, round_lines, story_lines, support_ids, babi_story,
    write_babi, ParsedQA, read_babi_games,
)
