"""Position markers for source OOV words (docs/method.md §3.1, "OOV copying", Decision).

The pointer-generator copies words from the article, including words outside the fixed 50k
vocabulary. To keep ``fairseq-generate`` unmodified, preprocessing rewrites every such word as a
*position marker*:

* a source token that is not in the vocabulary becomes ``<unk-j>``, where ``j`` is the 0-based
  position of the **first occurrence** of that word in the (truncated) source, so a repeated OOV
  word always gets the same marker;
* a target token that is not in the vocabulary but occurs in the truncated source becomes the
  same ``<unk-j>`` as in the source (the model can copy it);
* a target OOV that does not occur in the truncated source stays ``<unk>`` (nothing to copy).

The joined fairseq dictionary holds fairseq's 4 specials, the real vocabulary, and then the
``N`` markers ``<unk-0> … <unk-{N-1}>`` as one contiguous block at its end (``N`` = the maximum
source length, the phase limit of docs/method.md §3.1, default 400). Post-processing (:func:`restore`)
puts the j-th source word back in place of ``<unk-j>``.

This module is plain Python (no fairseq import) apart from :func:`marker_id_range` and
:func:`demote_markers`, which work on an already loaded fairseq ``Dictionary`` / id tensor.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Container, Dict, Iterable, List, Sequence, Tuple

from fairseq_acvi.data.text_lines import read_text_lines

UNK = "<unk>"
#: fairseq's implicit specials; they must not appear in dict.txt (fairseq adds them itself).
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
MARKER_RE = re.compile(r"^<unk-(\d+)>$")
DEFAULT_MAX_SOURCE_POSITIONS = 400
DEFAULT_VOCAB_SIZE = 50000


def marker(j: int) -> str:
    """The marker token for source position ``j`` (0-based)."""
    if j < 0:
        raise ValueError(f"marker position must be >= 0, got {j}")
    return f"<unk-{j}>"


def marker_position(token: str) -> int:
    """Position ``j`` of a marker token ``<unk-j>``, or -1 if ``token`` is not a marker."""
    m = MARKER_RE.match(token)
    return int(m.group(1)) if m else -1


def is_reserved(token: str) -> bool:
    """True for tokens that may not occur in input text (fairseq specials and markers)."""
    return token in FAIRSEQ_SPECIALS or MARKER_RE.match(token) is not None


def encode_source(src: Sequence[str], vocab: Container[str]) -> Tuple[List[str], Dict[str, int]]:
    """Rewrite the OOV words of one (already truncated) source.

    Args:
        src: source tokens, length L (L <= the number of markers in the dictionary).
        vocab: the real vocabulary (markers and specials excluded).
    Returns:
        ``(encoded, first)``: ``encoded`` has length L, with each OOV token replaced by
        ``<unk-j>``; ``first`` maps each OOV word to ``j``, its first position in ``src``.
    """
    first: Dict[str, int] = {}
    out: List[str] = []
    for i, w in enumerate(src):
        if w in vocab:
            out.append(w)
        else:
            j = first.setdefault(w, i)
            out.append(marker(j))
    return out, first


def encode_target(tgt: Sequence[str], vocab: Container[str], first: Dict[str, int]) -> List[str]:
    """Rewrite the OOV words of one target given the source's ``first`` map.

    In-vocabulary words are kept, an OOV word found in the truncated source becomes its source
    marker, any other OOV word becomes ``<unk>``. Output length == ``len(tgt)``.
    """
    out: List[str] = []
    for w in tgt:
        if w in vocab:
            out.append(w)
        elif w in first:
            out.append(marker(first[w]))
        else:
            out.append(UNK)
    return out


def restore(tokens: Sequence[str], src: Sequence[str]) -> List[str]:
    """Replace each ``<unk-j>`` in ``tokens`` by ``src[j]`` (the inverse of the encoding).

    ``src`` is the source before encoding (the original words; truncated or not, since
    ``j`` < the truncation length). Raises ``ValueError`` for a marker beyond the source, which
    means the hypothesis and source files are not aligned. ``<unk>`` is left unchanged.
    """
    out: List[str] = []
    for t in tokens:
        j = marker_position(t)
        if j < 0:
            out.append(t)
        elif j < len(src):
            out.append(src[j])
        else:
            raise ValueError(f"{t} points past the end of a source of {len(src)} tokens")
    return out


def build_vocab(counts: Counter, size: int) -> List[str]:
    """The ``size`` most frequent words, ties broken alphabetically (deterministic).

    Reserved tokens (fairseq specials, markers) are never part of the vocabulary.
    """
    if size <= 0:
        raise ValueError(f"--vocab-size must be positive, got {size}")
    items = [(w, c) for w, c in counts.items() if not is_reserved(w)]
    items.sort(key=lambda wc: (-wc[1], wc[0]))
    return [w for w, _ in items[:size]]


def dictionary_lines(words: Sequence[str], counts: Counter, n_markers: int) -> Iterable[str]:
    """Lines of a fairseq ``dict.txt``: ``word count`` for the vocabulary, then the markers.

    Markers get count 0 and form one contiguous block after the real words, so that in the
    loaded dictionary their ids are ``[nspecial + V, nspecial + V + n_markers)``.
    """
    if n_markers <= 0:
        raise ValueError(f"--max-source-positions must be positive, got {n_markers}")
    for w in words:
        if any(ch.isspace() for ch in w) or not w:
            raise ValueError(f"vocabulary word {w!r} contains whitespace")
        yield f"{w} {counts[w]}"
    for j in range(n_markers):
        yield f"{marker(j)} 0"


def read_vocab(dict_path: str) -> Tuple[List[str], int]:
    """Read a ``dict.txt`` written by :func:`dictionary_lines`.

    Returns ``(words, n_markers)``; checks that the markers are exactly ``<unk-0>…<unk-{N-1}>``
    in order and contiguous at the end, and names the line of the first violation.
    """
    words: List[str] = []
    n_markers = 0
    for lineno, line in enumerate(read_text_lines(dict_path, newline="lf"), 1):
        parts = line.split(" ")
        if len(parts) < 2 or not parts[0]:
            raise ValueError(f"{dict_path}:{lineno}: expected 'word count', got {line!r}")
        w = parts[0]
        j = marker_position(w)
        if j >= 0:
            if j != n_markers:
                raise ValueError(f"{dict_path}:{lineno}: expected marker <unk-{n_markers}>, "
                                 f"got {w}")
            n_markers += 1
        elif n_markers:
            raise ValueError(f"{dict_path}:{lineno}: word {w!r} after the marker block "
                             "(markers must come last)")
        elif w in FAIRSEQ_SPECIALS:
            raise ValueError(f"{dict_path}:{lineno}: fairseq special {w} must not be listed")
        else:
            words.append(w)
    if n_markers == 0:
        raise ValueError(f"{dict_path}: no <unk-j> position markers; write it with "
                         "data_scripts/prepare_cnndm.py")
    return words, n_markers


def marker_id_range(dictionary) -> Tuple[int, int]:
    """``(first_id, n_markers)`` of the marker block in a loaded fairseq ``Dictionary``.

    Raises ``ValueError`` if the markers are absent or not contiguous ``<unk-0>…<unk-{N-1}>``.
    """
    first = dictionary.index(marker(0))
    if first == dictionary.unk():
        raise ValueError("dictionary has no <unk-0> marker")
    n = 0
    while first + n < len(dictionary) and dictionary[first + n] == marker(n):
        n += 1
    for i in range(first + n, len(dictionary)):
        if marker_position(dictionary[i]) >= 0:
            raise ValueError(f"marker {dictionary[i]} at id {i} is outside the contiguous block")
    return first, n


def demote_markers(ids, first_marker_id: int, max_positions: int, unk_id: int):
    """Map markers ``<unk-j>`` with ``j >= max_positions`` to ``<unk>``.

    Used when a training phase truncates sources below the preprocessing limit (docs/method.md §3.1,
    phased training): a target marker pointing past the truncated source cannot be copied.

    Args:
        ids: LongTensor of token ids, any shape.
    Returns:
        a new LongTensor of the same shape.
    """
    j = ids - first_marker_id
    beyond = j >= max_positions
    return ids.masked_fill(beyond, unk_id)
