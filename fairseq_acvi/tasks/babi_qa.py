"""Task ``babi_qa``: bAbI question answering for memory networks (docs/method.md §4.1, §4.3).

``data`` is any folder of bAbI v1.2 files ``qa{N}_*_{train,test}.txt`` (``en``, ``en-10k``, ``hn``,
``hn-10k``, ``shuffled``, ``shuffled-10k``, or the guess-the-number generator's output). Subsets:

* ``train`` / ``valid``: a seeded split (``--babi-split-seed``, independent of ``--seed``) of each
  selected task's training file, ``--valid-fraction`` 0.1 (900/100 for the 1k files);
* ``test``: the test files (``fairseq-validate --valid-subset test`` gives test accuracy).

Several tasks (``--babi-tasks 1,2,3`` or ``all``) are trained jointly on the union. The dictionary is
built from the words and answers of all files of the selected tasks (sorted, so rebuilding it from
the same data reproduces it exactly; a checkpoint must be used with the same data folder and tasks).
The answer is predicted over the whole dictionary (``--answer-classes answers``: over the training
files' answers only), one class per distinct answer field: a one-word
answer is its word's symbol, a multi-word one (``hn``: ``rasoi ghar``) the symbol ``rasoi▁ghar``
(fairseq_acvi/data/babi.py); ``answer_text(task.target_dictionary[idx])`` reads an answer.
"""

import logging
from dataclasses import dataclass, field
from typing import Dict, List

import torch
from fairseq.data import Dictionary
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II

from fairseq_acvi.data.babi import (BabiDataset, BabiExample, find_task_files, parse_babi_file,
                                    parse_task_list, split_train_valid, tokenize)

logger = logging.getLogger(__name__)


@dataclass
class BabiQAConfig(FairseqDataclass):
    data: str = field(default="", metadata={"help": "folder with qa{N}_*_{train,test}.txt files"})
    babi_tasks: str = field(default="1", metadata={
        "help": "task numbers: '1', '1,2,3', '1-20' or 'all' (several = joint training)"})
    memory_size: int = field(default=50, metadata={
        "help": "number of most recent statements kept as memories"})
    babi_split_seed: int = field(default=1, metadata={
        "help": "seed of the train/valid split of the training files (independent of --seed)"})
    valid_fraction: float = field(default=0.1, metadata={
        "help": "share of each training file held out as 'valid' (0.1: 900/100 on bAbI 1k)"})
    answer_classes: ChoiceEnum(["dictionary", "answers"]) = field(default="dictionary", metadata={
        "help": "the classes an answer is predicted over: dictionary = every symbol of the "
                "dictionary (story words included, as Sukhbaatar et al. and the published "
                "runs); answers = only the answers of the selected tasks' training files "
                "(story words such as Hindi's inflected 'gusalkhaney' are no candidates; an "
                "answer found only in a test file gets probability 0)"})
    seed: int = II("common.seed")


@register_task("babi_qa", dataclass=BabiQAConfig)
class BabiQATask(FairseqTask):
    """bAbI QA: net_input = {story (B, M, L), query (B, Lq)}, target = answer id (B,)."""

    def __init__(self, cfg: BabiQAConfig, dictionary: Dictionary,
                 examples: Dict[str, List[BabiExample]]):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.examples = examples
        self.train_size = len(examples["train"])

    @classmethod
    def read_examples(cls, cfg: BabiQAConfig) -> Dict[str, List[BabiExample]]:
        """Parse the selected tasks and split them: {"train", "valid", "test"} -> examples."""
        if not cfg.data:
            raise ValueError("babi_qa: the data folder (positional 'data') is required")
        if not 0.0 <= cfg.valid_fraction < 1.0:
            raise ValueError(f"--valid-fraction must be in [0, 1), got {cfg.valid_fraction}")
        if cfg.memory_size < 1:
            raise ValueError(f"--memory-size must be >= 1, got {cfg.memory_size}")
        files = find_task_files(cfg.data)
        tasks = parse_task_list(cfg.babi_tasks, list(files))
        out: Dict[str, List[BabiExample]] = {"train": [], "valid": [], "test": []}
        for t in tasks:
            if "train" not in files[t]:
                raise ValueError(f"{cfg.data}: task {t} has no *_train.txt file")
            train = parse_babi_file(files[t]["train"], task=t)
            tr, va = split_train_valid(len(train), cfg.valid_fraction, cfg.babi_split_seed + 1000 * t)
            out["train"] += [train[i] for i in tr]
            out["valid"] += [train[i] for i in va]
            if "test" in files[t]:
                out["test"] += parse_babi_file(files[t]["test"], task=t)
        return out

    @staticmethod
    def build_babi_dictionary(examples: Dict[str, List[BabiExample]]) -> Dictionary:
        """Dictionary of every word and answer (sorted) after fairseq's 4 special symbols."""
        words = set()
        for exs in examples.values():
            for ex in exs:
                for s in ex.story:
                    words.update(s)
                words.update(ex.query)
                words.add(ex.answer)
        d = Dictionary()
        for w in sorted(words):
            d.add_symbol(w)
        return d

    @classmethod
    def setup_task(cls, cfg: BabiQAConfig, **kwargs):
        examples = cls.read_examples(cfg)
        d = cls.build_babi_dictionary(examples)
        logger.info(f"babi_qa: tasks {cfg.babi_tasks}: {len(examples['train'])} train, "
                    f"{len(examples['valid'])} valid, {len(examples['test'])} test; "
                    f"dictionary {len(d)} types")
        return cls(cfg, d, examples)

    def load_dataset(self, split: str, epoch: int = 1, combine: bool = False, **kwargs):
        if split not in self.examples:
            raise ValueError(f"babi_qa: unknown subset {split!r} (train, valid, test)")
        if not self.examples[split]:
            raise ValueError(f"babi_qa: subset {split!r} is empty for tasks {self.cfg.babi_tasks}")
        self.datasets[split] = BabiDataset(self.examples[split], self.dictionary,
                                           self.cfg.memory_size, shuffle=(split == "train"))
        return self.datasets[split]

    def answer_indices(self) -> List[int]:
        """Sorted dictionary indices of the answers of the training files (train and valid),
        the classes ``--answer-classes answers`` keeps."""
        return sorted({self.dictionary.index(ex.answer)
                       for split in ("train", "valid") for ex in self.examples[split]})

    def answer_class_indices(self):
        """The answer classes the models predict over: None (the whole dictionary) or
        :meth:`answer_indices` under ``--answer-classes answers``."""
        if str(getattr(self.cfg, "answer_classes", "dictionary")) == "answers":
            return self.answer_indices()
        return None

    def build_net_input(self, stories: List[List[str]], questions: List[str]) -> dict:
        """net_input for plain-text stories (each a chronological list of sentences) and questions.

        Tokenised like the data files; unknown words map to unk. Returns {"story": (B, M, L),
        "query": (B, Lq)} long tensors (keep the last ``--memory-size`` sentences of each story).
        """
        if len(stories) != len(questions):
            raise ValueError(f"build_net_input: {len(stories)} stories but {len(questions)} questions")
        exs = [BabiExample([tokenize(s) for s in story if tokenize(s)], tokenize(q),
                           self.dictionary.unk_word, [])
               for story, q in zip(stories, questions)]
        ds = BabiDataset(exs, self.dictionary, self.cfg.memory_size)
        return ds.batch(torch.arange(len(exs)))["net_input"]

    def begin_epoch(self, epoch, model):
        """Forward the epoch to the model (linear start switches its softmax on and off)."""
        if hasattr(model, "begin_epoch"):
            model.begin_epoch(epoch)

    def max_positions(self):
        return None

    @property
    def source_dictionary(self) -> Dictionary:
        return self.dictionary

    @property
    def target_dictionary(self) -> Dictionary:
        return self.dictionary
