"""bAbI v1.2 question-answering data: a strict parser and a fairseq dataset (docs/method.md §4.1, §4.3).

File format (every folder of the release: ``en``, ``hn``, ``shuffled``, their ``-10k`` versions and
``en-valid*``; and the game generator of §4.4): one line per sentence, ``ID text``; IDs start at 1 for
each story and otherwise increase by 1. A question line is
``ID question<TAB>answer<TAB>supporting-fact-ids``. Each question is answered from the statements of
its story that precede it (earlier questions are not memories). Files are UTF-8 (a byte-order mark
is skipped); lines may end in LF or CRLF.

Conventions used here:

* Tokens: lower-cased words; ``.``, ``?``, ``!`` and the Devanagari dandas ``।`` ``॥`` are dropped;
  other punctuation (``, ; : " ( )``) is its own token.
* The answer is the whole answer field, predicted as ONE class (a dictionary symbol), whatever its
  shape: one word (``bathroom``), a comma-joined list (tasks 8 and 19: ``n,w``,
  ``apple,football``; as in the reference MemN2N implementations), or several words (the Hindi
  folders: ``rasoi ghar``). The symbol is the lower-cased field with its words joined by
  :data:`ANSWER_JOIN` (U+2581 ``▁``; spaces around list commas dropped): ``rasoi▁ghar``. A
  one-word answer's symbol is the word itself, exactly as before multi-word answers were read.
  ``▁`` is reserved: no line may contain it, so a symbol never has two readings and holds no
  whitespace (fairseq's ``dict.txt`` lines are ``symbol count``). :func:`answer_text` turns a
  symbol back into the answer as written (``rasoi ghar``), for reports.
* ``supports`` are indices into ``story`` (the example's statements, chronological order).

Nothing is skipped: a bad ID, a missing tab field, an empty answer, a byte sequence that is not
UTF-8, or a supporting fact that points forward, to a question or to a line that does not exist
raises ``ValueError("<file>:<line>: …")``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from glob import glob
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import FairseqDataset
from torch import Tensor

from fairseq_acvi.data.text_lines import read_text_lines

_TOKEN_RE = re.compile(r"[^\s.,?!;:\"()\u0964\u0965]+|[,;:\"()]")
_DROP = {".", "?", "!"}
_LINE_RE = re.compile(r"^(\d+) +(.*)$")
#: Joins the words of a multi-word answer into one class symbol (U+2581, LOWER ONE EIGHTH BLOCK,
#: the character SentencePiece uses for a space): not whitespace, so the symbol survives fairseq's
#: ``symbol count`` dictionary lines; reserved, so no bAbI line may contain it.
ANSWER_JOIN = "\u2581"
_FILE_RE = re.compile(r"^qa(\d+)_.*_(train|test)\.txt$")
#: The task folders of the official release (tasks_1-20_v1-2/); ``en-valid`` and ``en-valid-10k``
#: re-split the English training files into qa{N}_train / qa{N}_valid and are not read as tasks.
RELEASE_VARIANTS = ("en", "en-10k", "hn", "hn-10k", "shuffled", "shuffled-10k")


def tokenize(text: str) -> List[str]:
    """Lower-case word tokens of a sentence or question (``. ? !`` and ``।`` ``॥`` dropped)."""
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in _DROP]


def answer_symbol(field: str) -> str:
    """The class symbol of an answer field: lower-cased, its words joined by :data:`ANSWER_JOIN`.

    ``"bathroom"`` -> ``"bathroom"``; ``"n,w"`` -> ``"n,w"``; ``"Rasoi ghar"`` -> ``"rasoi▁ghar"``;
    ``"apple, football"`` -> ``"apple,football"``. Raises ValueError (no file:line; the parser
    adds it) for an empty field, an empty item of a comma-separated list, or a field that
    contains :data:`ANSWER_JOIN`.
    """
    if ANSWER_JOIN in field:
        raise ValueError(f"answer {field!r} contains {ANSWER_JOIN!r} (U+2581), which is reserved "
                         f"for joining the words of a multi-word answer")
    text = re.sub(r"\s*,\s*", ",", field.strip().lower())
    if not text:
        raise ValueError("answer is empty")
    if "," in text and not all(text.split(",")):
        raise ValueError(f"answer {field.strip()!r} has an empty item in its comma-separated list")
    return ANSWER_JOIN.join(text.split())


def answer_text(symbol: str) -> str:
    """The answer as written, from its class symbol (``"rasoi▁ghar"`` -> ``"rasoi ghar"``)."""
    return symbol.replace(ANSWER_JOIN, " ")


@dataclass
class BabiExample:
    """One question with the statements that precede it in its story.

    story: chronological list of tokenised statements; query: tokenised question;
    answer: the answer's class symbol (:func:`answer_symbol`; :func:`answer_text` reads it);
    supports: indices into ``story``; task: bAbI task number;
    source: ``file:line`` of the question (for error messages and reports).
    """

    story: List[List[str]]
    query: List[str]
    answer: str
    supports: List[int]
    task: int = 0
    source: str = ""


def parse_babi_lines(lines: Sequence[str], path: str = "<string>", task: int = 0) -> List[BabiExample]:
    """Parse the lines of one bAbI file into examples (strict; see the module docstring)."""
    examples: List[BabiExample] = []
    statements: List[List[str]] = []          # statements of the current story
    line_kind: Dict[int, Optional[int]] = {}  # story line id -> statement index (None: question)
    prev_id = 0
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n").rstrip("\r")
        where = f"{path}:{lineno}"
        if not line.strip():
            raise ValueError(f"{where}: empty line (bAbI files have none)")
        if ANSWER_JOIN in line:
            raise ValueError(f"{where}: contains {ANSWER_JOIN!r} (U+2581), reserved for joining "
                             f"the words of a multi-word answer (see fairseq_acvi/data/babi.py)")
        m = _LINE_RE.match(line)
        if m is None:
            raise ValueError(f"{where}: expected 'ID text', got {line[:60]!r}")
        lid = int(m.group(1))
        body = m.group(2)
        if lid == 1:
            statements, line_kind = [], {}
        elif lid != prev_id + 1:
            raise ValueError(f"{where}: line id {lid} does not follow {prev_id} (ids restart at 1 "
                             f"for a new story and otherwise increase by 1)")
        prev_id = lid
        if "\t" not in body:
            words = tokenize(body)
            if not words:
                raise ValueError(f"{where}: statement has no words")
            line_kind[lid] = len(statements)
            statements.append(words)
            continue
        fields = body.split("\t")
        if len(fields) != 3:
            raise ValueError(f"{where}: question line needs 3 tab-separated fields "
                             f"(question, answer, supporting ids), found {len(fields)}")
        question, answer_field, sup = fields
        query = tokenize(question)
        if not query:
            raise ValueError(f"{where}: question has no words")
        try:
            answer = answer_symbol(answer_field)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        supports: List[int] = []
        for s in sup.split():
            if not s.isdecimal():
                raise ValueError(f"{where}: supporting fact id {s!r} is not a number")
            sid = int(s)
            if sid >= lid:
                raise ValueError(f"{where}: supporting fact {sid} points forward (question is line {lid})")
            if sid not in line_kind:
                raise ValueError(f"{where}: supporting fact {sid} is not a line of this story")
            if line_kind[sid] is None:
                raise ValueError(f"{where}: supporting fact {sid} is a question, not a statement")
            supports.append(line_kind[sid])
        examples.append(BabiExample([list(w) for w in statements], query, answer, supports,
                                    task, where))
        line_kind[lid] = None
    return examples


def read_lines(path: str) -> List[str]:
    """The lines of a UTF-8 text file (a leading byte-order mark skipped; LF, CRLF or CR ends a
    line). A line that is not UTF-8 raises ValueError naming ``path:line``."""
    return read_text_lines(path, newline="any")


def parse_babi_file(path: str, task: int = 0) -> List[BabiExample]:
    """Parse one bAbI file (UTF-8). Raises ValueError naming the file and line on bad input."""
    lines = read_lines(path)
    if not lines:
        raise ValueError(f"{path}: empty file")
    return parse_babi_lines(lines, path, task)


def find_task_files(folder: str) -> Dict[int, Dict[str, str]]:
    """Map task number -> {"train": path, "test": path} for every ``qa{N}_*_{train,test}.txt``."""
    if not os.path.isdir(folder):
        raise ValueError(f"bAbI data folder {folder!r} does not exist")
    found: Dict[int, Dict[str, str]] = {}
    for path in sorted(glob(os.path.join(folder, "qa*_*.txt"))):
        m = _FILE_RE.match(os.path.basename(path))
        if m is None:
            continue
        n, split = int(m.group(1)), m.group(2)
        if split in found.setdefault(n, {}):
            raise ValueError(f"{folder}: two {split} files for task {n}: "
                             f"{found[n][split]} and {path}")
        found[n][split] = path
    if not found:
        hint = ""
        if glob(os.path.join(folder, "qa*_valid.txt")):
            hint = (" (this looks like en-valid / en-valid-10k, whose qa{N}_train.txt + "
                    "qa{N}_valid.txt re-split en's training file: pass the en / en-10k folder)")
        raise ValueError(f"{folder}: no files named qa{{N}}_*_{{train,test}}.txt{hint}")
    return found


def parse_task_list(spec: str, available: Sequence[int]) -> List[int]:
    """``"1"``, ``"1,2,3"``, ``"1-20"`` or ``"all"`` -> sorted task numbers (checked against data)."""
    spec = str(spec).strip()
    if spec.lower() == "all":
        return sorted(available)
    tasks: List[int] = []
    for part in spec.split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = part.split("-")
                tasks.extend(range(int(a), int(b) + 1))
            else:
                tasks.append(int(part))
        except ValueError:
            raise ValueError(f"--babi-tasks: cannot read {spec!r} (use 1 or 1,2,3 or 1-20 or all)")
    missing = [t for t in tasks if t not in available]
    if missing:
        raise ValueError(f"--babi-tasks: task(s) {missing} not found (available: {sorted(available)})")
    return sorted(set(tasks))


def split_train_valid(n: int, valid_fraction: float, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n)`` into train/valid indices (900/100 for a 1k file at 0.1)."""
    n_valid = int(round(n * valid_fraction))
    perm = np.random.RandomState(seed).permutation(n)
    return np.sort(perm[n_valid:]), np.sort(perm[:n_valid])


def encode_examples(examples: Sequence[BabiExample], dictionary, memory_size: int
                    ) -> Dict[str, Tensor]:
    """Tensorise examples with ``dictionary`` (unknown words -> unk).

    Memory slot 0 holds the MOST RECENT statement (so the slot index is the reverse temporal
    index of §4.1); only the last ``memory_size`` statements are kept.

    Returns story (N, M, L) long, query (N, Lq) long, answer (N,) long, n_mem (N,) long, where
    M = min(memory_size, longest story), L / Lq the longest sentence / question; padding = pad.
    """
    pad = dictionary.pad()
    n = len(examples)
    mems = [ex.story[-memory_size:][::-1] for ex in examples]
    M = max(1, max((len(m) for m in mems), default=1))
    L = max(1, max((len(s) for m in mems for s in m), default=1))
    Lq = max(1, max((len(ex.query) for ex in examples), default=1))
    story = torch.full((n, M, L), pad, dtype=torch.long)
    query = torch.full((n, Lq), pad, dtype=torch.long)
    answer = torch.empty(n, dtype=torch.long)
    n_mem = torch.empty(n, dtype=torch.long)
    index = dictionary.index
    for i, (ex, mem) in enumerate(zip(examples, mems)):
        n_mem[i] = len(mem)
        for j, sent in enumerate(mem):
            story[i, j, :len(sent)] = torch.tensor([index(w) for w in sent])
        query[i, :len(ex.query)] = torch.tensor([index(w) for w in ex.query])
        answer[i] = index(ex.answer)
    return {"story": story, "query": query, "answer": answer, "n_mem": n_mem}


class BabiDataset(FairseqDataset):
    """Pre-tensorised bAbI examples; :meth:`collater` trims padding to the batch's extent.

    ``shuffle``: ordered_indices() is a random permutation (fairseq seeds it per epoch), so that
    minibatches are drawn at random as in §4.1; otherwise the file order.
    """

    def __init__(self, examples: Sequence[BabiExample], dictionary, memory_size: int = 50,
                 shuffle: bool = False):
        self.shuffle = shuffle
        self.examples = list(examples)
        self.dictionary = dictionary
        self.memory_size = memory_size
        self.tensors = encode_examples(self.examples, dictionary, memory_size)
        story = self.tensors["story"]
        self.sent_len = (story.ne(dictionary.pad())).sum(-1).max(-1).values  # (N,)
        self.sizes = (self.tensors["n_mem"] * story.size(2)).numpy()
        # per-example extents as numpy arrays: the collater takes the batch maxima without
        # tensor ops, then copies only the trimmed (B, M_b, L_b) block with one index_select
        self._extent = np.stack([self.tensors["n_mem"].numpy(),
                                 self.sent_len.clamp(min=1).numpy(),
                                 self.tensors["query"].ne(dictionary.pad()).sum(1)
                                 .clamp(min=1).numpy()], 1)                  # (N, 3)

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> int:
        return index

    def collater(self, samples: List[int]) -> dict:
        """Batch of indices -> fairseq sample dict.

        net_input: story (B, M_b, L_b), query (B, Lq_b); target (B,); id (B,).
        """
        if len(samples) == 0:
            return {}
        idx = torch.as_tensor(samples, dtype=torch.long)
        return self.batch(idx)

    def batch(self, idx: Tensor) -> dict:
        """Index tensor (B,) -> the sample dict of :meth:`collater` (padding trimmed)."""
        t = self.tensors
        m, ls, lq = (int(x) for x in self._extent[idx.numpy()].max(0))
        return {
            "id": idx,
            "nsentences": len(idx),
            "ntokens": len(idx),
            "net_input": {"story": t["story"][:, :m, :ls].index_select(0, idx),
                          "query": t["query"][:, :lq].index_select(0, idx)},
            "target": t["answer"].index_select(0, idx),
        }

    def num_tokens(self, index: int) -> int:
        return int(self.sizes[index])

    def size(self, index: int) -> int:
        return int(self.sizes[index])

    def ordered_indices(self) -> np.ndarray:
        if self.shuffle:
            return np.random.permutation(len(self))
        return np.arange(len(self))
