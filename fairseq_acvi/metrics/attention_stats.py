"""What sparse and constrained attention were made for, measured on decoded outputs
(docs/method.md §3.5).

* **zero fraction**: the fraction of attention weights that are exactly 0, over every decoded
  step t and every real source position j (padding excluded), pooled over the corpus.
* **REP** (Malaviya, Ferreira & Martins 2018's repetition score, written here from their
  definition): for each hypothesis, every n-gram (n = 2) that occurs c > 1 times in it adds
  max(0, c − c_ref), c_ref its count in the reference; every bigram of two identical words
  ("the the") that occurs c ≥ 1 times adds w₂ · max(0, c − c_ref); REP = Σ (w₁ · first + w₂ ·
  second), w₁ = 1, w₂ = 2, reported as the total and per 100 reference words.
* **DROP** (their dropped-word score): with word alignments of the source to the reference and of
  the source to the hypothesis (Pharaoh "i-j" lines, e.g. from fast_align, which this project does
  not ship), 100 × #{source words aligned to the reference but not to the hypothesis} /
  #{source words aligned to the reference} (:func:`drop_score`).
* **DROP-attn**, the equivalent this project computes without an aligner (:func:`attention_drop`):
  100 × #{source words whose total attention over the decoded hypothesis, Σ_t a_tj, is below
  ``threshold`` (default 0.5)} / #{source words}, the last source position (``</s>``, the
  constrained normalisers' sink) excluded. A word that no step attends to with at least half a
  unit of attention was, in the attention's own account, not translated. It reads the model's
  attention, so it compares models whose attention means alignment (it is not comparable with an
  aligner's DROP, and a model can translate a word without attending to it).
* **sharpness**: the mean entropy of a step's attention, −Σ_j a_tj log a_tj in nats (0 for a
  one-hot row, log N for a uniform one), and the mean largest weight max_j a_tj, both over every
  decoded step, pooled over the corpus (:func:`attention_sharpness`).

Input: the ``attention.json`` of ``python -m fairseq_acvi.cli.attention_pictures`` (records with
``source``, ``hypothesis``, ``attn`` (T × N) and, when written by this module, ``reference``), or a
checkpoint decoded here over a whole subset::

    python -m fairseq_acvi.metrics.attention_stats --json runs/x/pictures/attention.json --refs ref.txt
    python -m fairseq_acvi.metrics.attention_stats --data data-bin/multi30k --path ckpt.pt \\
        --subset test --beam 5 --post-process sentencepiece --out stats.json

``--model-overrides "{'attention_normalizer': 'sparsemax'}"`` decodes a trained model with another
normaliser (no retraining). It prints (and with ``--out`` writes) one JSON object:
``zero_fraction``, ``entropy``, ``max_weight``, ``rep``, ``rep_per_100``, ``drop_attn``
(percent), the counts behind them and, with ``--src-ref-align`` /
``--src-hyp-align``, ``drop``.
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import sys
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence

#: Malaviya et al.'s weights of the repeated n-grams (w₁) and of the repeated words (w₂)
REP_W1, REP_W2 = 1.0, 2.0


# -- attention --------------------------------------------------------------------------------------
def zero_counts(attn_rows: Sequence[Sequence[float]]) -> tuple:
    """(#weights exactly 0, #weights) of one T × N attention matrix (rows over real positions)."""
    zeros = total = 0
    for row in attn_rows:
        zeros += sum(1 for a in row if a == 0.0)
        total += len(row)
    return zeros, total


def zero_fraction(matrices: Iterable[Sequence[Sequence[float]]]) -> float:
    """Pooled fraction of exactly-zero weights over every matrix (T × N, real positions only)."""
    zeros = total = 0
    for m in matrices:
        z, n = zero_counts(m)
        zeros, total = zeros + z, total + n
    return zeros / total if total else float("nan")


def attention_drop(matrices: Iterable[Sequence[Sequence[float]]], threshold: float = 0.5,
                   skip_last: bool = True) -> tuple:
    """DROP-attn counts: (#source words with Σ_t a_tj < threshold, #source words), the last
    position excluded when ``skip_last`` (module docstring)."""
    dropped = words = 0
    for m in matrices:
        if not m:
            continue
        N = len(m[0])
        for j in range(N - 1 if skip_last else N):
            words += 1
            if sum(row[j] for row in m) < threshold:
                dropped += 1
    return dropped, words


def attention_sharpness(matrices: Iterable[Sequence[Sequence[float]]]) -> tuple:
    """(Σ_t entropy of row t in nats, Σ_t max_j a_tj, #rows) over every T × N matrix; a weight
    of 0 adds nothing to the entropy (0 log 0 = 0)."""
    entropy = largest = 0.0
    rows = 0
    for m in matrices:
        for row in m:
            entropy -= sum(a * math.log(a) for a in row if a > 0.0)
            largest += max(row)
            rows += 1
    return entropy, largest, rows


# -- repetitions ------------------------------------------------------------------------------------
def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def rep_sentence(hyp: Sequence[str], ref: Sequence[str], n: int = 2, w1: float = REP_W1,
                 w2: float = REP_W2) -> float:
    """Malaviya et al.'s REP of one hypothesis against its reference (module docstring)."""
    h, r = _ngrams(hyp, n), _ngrams(ref, n)
    repeated = sum(max(0, c - r.get(g, 0)) for g, c in h.items() if c > 1)
    h2, r2 = _ngrams(hyp, 2), _ngrams(ref, 2)
    doubled = sum(max(0, c - r2.get(g, 0)) for g, c in h2.items() if g[0] == g[1])
    return w1 * repeated + w2 * doubled


def rep_score(hyps: Sequence[Sequence[str]], refs: Sequence[Sequence[str]], n: int = 2) -> Dict:
    """REP over a corpus: ``rep`` (the total) and ``rep_per_100`` (per 100 reference words)."""
    if len(hyps) != len(refs):
        raise ValueError(f"REP: {len(hyps)} hypotheses but {len(refs)} references")
    total = sum(rep_sentence(h, r, n) for h, r in zip(hyps, refs))
    words = sum(len(r) for r in refs)
    return {"rep": total, "rep_per_100": 100.0 * total / words if words else float("nan"),
            "reference_words": words}


# -- dropped words from an aligner ------------------------------------------------------------------
def parse_alignment(line: str) -> set:
    """The source indices of one Pharaoh line ``"0-0 1-2 …"``."""
    out = set()
    for pair in line.split():
        i, sep, _ = pair.partition("-")
        if not sep:
            raise ValueError(f"alignment: {pair!r} is not i-j")
        out.add(int(i))
    return out


def drop_score(src_ref: Sequence[str], src_hyp: Sequence[str]) -> Dict:
    """Malaviya et al.'s DROP from alignment lines (module docstring): ``drop`` in percent."""
    if len(src_ref) != len(src_hyp):
        raise ValueError(f"DROP: {len(src_ref)} source-reference alignments but {len(src_hyp)} "
                         "source-hypothesis ones")
    dropped = aligned = 0
    for a, b in zip(src_ref, src_hyp):
        ref_ix, hyp_ix = parse_alignment(a), parse_alignment(b)
        dropped += len(ref_ix - hyp_ix)
        aligned += len(ref_ix)
    return {"drop": 100.0 * dropped / aligned if aligned else float("nan"),
            "dropped_words": dropped, "reference_aligned_words": aligned}


# -- records ----------------------------------------------------------------------------------------
def strip_eos(tokens: Sequence[str]) -> List[str]:
    return [t for t in tokens if t != "</s>"]


def summarize(records: Sequence[Dict], refs: Optional[Sequence[Sequence[str]]] = None,
              threshold: float = 0.5) -> Dict:
    """The statistics of decoded records (``attn`` T × N over the source with its ``</s>``;
    ``hypothesis``; ``reference`` or ``refs`` given separately, token lists)."""
    mats = [r["attn"] for r in records if r.get("attn") is not None]
    dropped, words = attention_drop(mats, threshold)
    entropy, largest, steps = attention_sharpness(mats)
    out = {"sentences": len(records), "zero_fraction": zero_fraction(mats),
           "entropy": entropy / steps if steps else float("nan"),
           "max_weight": largest / steps if steps else float("nan"), "steps": steps,
           "drop_attn": 100.0 * dropped / words if words else float("nan"),
           "drop_attn_words": dropped, "source_words": words, "drop_attn_threshold": threshold}
    if refs is None and records and all("reference" in r for r in records):
        refs = [r["reference"] for r in records]
    if refs is not None:
        out.update(rep_score([strip_eos(r["hypothesis"]) for r in records],
                             [strip_eos(r) for r in refs]))
    return out


def decode_records(data: str, path: str, subset: str, beam: int, max_len_a: float,
                   max_len_b: int, post_process: Optional[str],
                   overrides: Optional[Dict] = None) -> List[Dict]:
    """Decode every sentence of ``subset`` with fairseq's beam search and read the best hypothesis
    teacher-forced (:func:`fairseq_acvi.cli.attention_pictures.pictures_data`); add the
    reference; with ``post_process`` (``sentencepiece``, ``subword_nmt``) hypothesis and reference
    are detokenised into words for REP (the attention stays over pieces). ``overrides``: model
    options that replace the checkpoint's (fairseq's ``--model-overrides``, e.g. another
    ``attention_normalizer`` for a trained model)."""
    from fairseq import checkpoint_utils
    from fairseq.data.data_utils import post_process as fairseq_post_process

    from fairseq_acvi.cli.attention_pictures import pictures_data, subset_name

    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [path], arg_overrides={**(overrides or {}), "data": data})
    model = models[0].eval()
    name = subset_name(data, subset)
    task.load_dataset(name)
    dataset = task.dataset(name)
    records = pictures_data(model, task, name, list(range(len(dataset))), beam, max_len_a, max_len_b)
    tgt = task.target_dictionary
    for r in records:
        ref = tgt.string(dataset[r["id"]]["target"]).split()
        hyp = strip_eos(r["hypothesis"])
        if post_process:
            ref = fairseq_post_process(" ".join(ref), post_process).split()
            hyp = fairseq_post_process(" ".join(hyp), post_process).split()
        r["reference"], r["hypothesis_words"] = ref, hyp
    return records


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", help="attention.json of fairseq_acvi.cli.attention_pictures")
    p.add_argument("--refs", help="with --json: reference file, one line per record (by id)")
    p.add_argument("--data", help="data-bin folder (with --path: decode a whole subset here)")
    p.add_argument("--path", help="checkpoint")
    p.add_argument("--subset", default="test")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--max-len-a", type=float, default=0.0)
    p.add_argument("--max-len-b", type=int, default=200)
    p.add_argument("--post-process", default=None, help="sentencepiece or subword_nmt (REP on words)")
    p.add_argument("--model-overrides", default=None, metavar="DICT",
                   help="with --path: model options replacing the checkpoint's, a Python dict as "
                        "fairseq-generate's (e.g. \"{'attention_normalizer': 'sparsemax'}\")")
    p.add_argument("--threshold", type=float, default=0.5, help="DROP-attn threshold (default 0.5)")
    p.add_argument("--src-ref-align", help="Pharaoh alignments source-reference (DROP)")
    p.add_argument("--src-hyp-align", help="Pharaoh alignments source-hypothesis (DROP)")
    p.add_argument("--records-out", help="write the decoded records (JSON) here")
    p.add_argument("--out", help="write the statistics (JSON) here")
    return p


def _lines(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def parse_model_overrides(text: Optional[str]) -> Dict:
    """``--model-overrides`` (this command's and attention_pictures'): a Python dict literal as
    fairseq-generate's, {} when empty, or an error naming the option."""
    if not text:
        return {}
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as err:
        raise SystemExit(f"--model-overrides: not a Python dict literal ({err}): {text!r}")
    if not isinstance(value, dict):
        raise SystemExit(f"--model-overrides: expected a dict, got {type(value).__name__}: {text!r}")
    return value


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if bool(args.json) == bool(args.path):
        raise SystemExit("give either --json FILE or --data DIR --path CHECKPOINT")
    if bool(args.src_ref_align) != bool(args.src_hyp_align):
        raise SystemExit("DROP needs both --src-ref-align and --src-hyp-align")
    if args.json:
        with open(args.json, encoding="utf-8") as f:
            records = json.load(f)["sentences"]
        refs = None
        if args.refs:
            lines = _lines(args.refs)
            refs = [lines[r["id"]].split() for r in records]
    else:
        if not args.data:
            raise SystemExit("--path needs --data")
        records = decode_records(args.data, args.path, args.subset, args.beam, args.max_len_a,
                                 args.max_len_b, args.post_process,
                                 parse_model_overrides(args.model_overrides))
        refs = None
        for r in records:   # REP on words: the pieces stay under hypothesis_pieces
            r["hypothesis_pieces"], r["hypothesis"] = r["hypothesis"], r.pop("hypothesis_words")
        if args.records_out:
            with open(args.records_out, "w", encoding="utf-8") as f:
                json.dump({"sentences": records}, f, ensure_ascii=False)
    stats = summarize(records, refs, args.threshold)
    if args.src_ref_align:
        stats.update(drop_score(_lines(args.src_ref_align), _lines(args.src_hyp_align)))
    text = json.dumps(stats, indent=1, sort_keys=True)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
