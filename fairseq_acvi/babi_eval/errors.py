"""Where a bAbI model's answers go wrong : per-answer confusion and errors by the
answer's form, the question's wording and the supporting statement (docs/method.md §4.1).

An answer's *form* (:func:`answer_form`) has two parts, both read off the data alone:

* ``words``: ``one`` (``daftar``), ``several`` (``rasoi ghar``: its class symbol joins the words
  with ``▁``, fairseq_acvi/data/babi.py) or ``list`` (task 8 / 19's ``apple,football``);
* ``verbatim``: ``verbatim`` when every word of the answer is a word of its supporting statements
  (English task 1: ``bathroom``), ``not verbatim`` otherwise (Hindi task 1: the story says
  ``gusalkhaney``, the answer is ``gusalkhana``; also yes/no and counting answers).

:func:`breakdown` groups right and wrong answers by these and by the gold answer, the question
wording (the question's words that are not in the story: ``is samay kahan hai``) and the length
of the first supporting statement (what position encoding sees), and builds the gold → predicted
confusion. ``python -m fairseq_acvi.babi_eval.errors`` runs a fairseq checkpoint
(``fairseq-train``'s ``checkpoint_best.pt``) or a bAbI report checkpoint (``OUT/ckpt/*.pt``) on
a test file and writes the breakdown as JSON and markdown.
"""
import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from typing import Dict, List, Optional, Sequence

import torch

from fairseq_acvi.data.babi import ANSWER_JOIN, BabiExample, answer_text


def answer_words(symbol: str) -> List[str]:
    """The words of an answer's class symbol: ``rasoi▁ghar`` -> [rasoi, ghar];
    ``apple,football`` -> [apple, football]."""
    return [w for item in symbol.split(",") for w in item.split(ANSWER_JOIN) if w]


def answer_form(ex: BabiExample) -> Dict[str, str]:
    """{"words": one | several | list, "verbatim": verbatim | not verbatim} of an example's
    answer (see the module docstring)."""
    if "," in ex.answer:
        words = "list"
    elif ANSWER_JOIN in ex.answer:
        words = "several"
    else:
        words = "one"
    support = {w for i in ex.supports for w in ex.story[i]}
    verbatim = all(w in support for w in answer_words(ex.answer))
    return {"words": words, "verbatim": "verbatim" if verbatim else "not verbatim"}


def question_wording(ex: BabiExample) -> str:
    """The question's words that are not words of its story, in order (the wording without the
    names: ``sita is samay kahan hai`` -> ``is samay kahan hai``)."""
    story = {w for s in ex.story for w in s}
    return " ".join(w for w in ex.query if w not in story) or "(all words in the story)"


def _cell(right: int, n: int) -> dict:
    return {"n": n, "right": right, "wrong": n - right,
            "accuracy": round(100.0 * right / n, 2) if n else None}


def breakdown(examples: Sequence[BabiExample], predicted: Sequence[str]) -> dict:
    """Right and wrong answers grouped several ways.

    examples: the questions; predicted: the predicted class symbol of each (same order).
    Returns {"n", "accuracy", "by_answer", "by_words", "by_verbatim", "by_form",
    "by_question", "by_support_length", "by_support_distance", "confusion", "wrong"}: each ``by_*`` maps
    a group to {"n", "right", "wrong", "accuracy" (%)}; ``confusion`` maps gold answer text ->
    predicted answer text -> count (every cell, right ones included). ``by_support_distance`` is
    how many statements came after the (last) supporting one (0: the most recent statement);
    ``wrong`` lists every wrong answer as {"source" (file:line), "gold", "predicted"}.
    """
    if len(examples) != len(predicted):
        raise ValueError(f"breakdown: {len(examples)} examples but {len(predicted)} predictions")
    groups: Dict[str, Dict[str, List[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    confusion: Dict[str, Counter] = defaultdict(Counter)
    right_total, wrong = 0, []
    for ex, pred in zip(examples, predicted):
        ok = int(pred == ex.answer)
        right_total += ok
        form = answer_form(ex)
        last = max(ex.supports) if ex.supports else len(ex.story) - 1
        keys = {"by_answer": answer_text(ex.answer), "by_words": form["words"],
                "by_verbatim": form["verbatim"],
                "by_form": f"{form['words']}, {form['verbatim']}",
                "by_question": question_wording(ex),
                "by_support_length": str(len(ex.story[last])) if ex.story else "0",
                "by_support_distance": str(len(ex.story) - 1 - last)}
        for group, key in keys.items():
            cell = groups[group][key]
            cell[0] += ok
            cell[1] += 1
        confusion[answer_text(ex.answer)][answer_text(pred)] += 1
        if not ok:
            wrong.append({"source": ex.source, "gold": answer_text(ex.answer),
                          "predicted": answer_text(pred)})
    out = {"n": len(examples), "accuracy": _cell(right_total, len(examples))["accuracy"]}
    for group, cells in groups.items():
        out[group] = {k: _cell(r, n) for k, (r, n) in sorted(cells.items(), key=_order)}
    out["confusion"] = {g: dict(sorted(c.items())) for g, c in sorted(confusion.items())}
    out["wrong"] = wrong
    return out


def _order(item):
    k = item[0]
    return (0, int(k), "") if k.isdigit() else (1, 0, k)


def markdown(result: dict, title: str = "") -> List[str]:
    """The breakdown as markdown tables (one per grouping, then the confusion matrix)."""
    lines = [f"## {title}" if title else "", "",
             f"{result['n']} questions, accuracy {result['accuracy']} %.", ""]
    names = {"by_answer": "gold answer", "by_words": "answer words",
             "by_verbatim": "answer in the supporting facts", "by_form": "answer form",
             "by_question": "question wording", "by_support_length": "words in the supporting statement",
             "by_support_distance": "statements after the supporting one"}
    for group, label in names.items():
        if group not in result:
            continue
        lines += [f"| {label} | n | wrong | accuracy % |", "|---|---:|---:|---:|"]
        lines += [f"| {k} | {c['n']} | {c['wrong']} | {c['accuracy']} |"
                  for k, c in result[group].items()]
        lines.append("")
    gold = list(result["confusion"])
    preds = sorted({p for row in result["confusion"].values() for p in row})
    lines += ["Confusion (rows: gold answer, columns: predicted):", "",
              "| gold \\ predicted | " + " | ".join(preds) + " |",
              "|---|" + "---:|" * len(preds)]
    for g in gold:
        row = result["confusion"][g]
        lines.append(f"| {g} | " + " | ".join(str(row.get(p, "")) for p in preds) + " |")
    lines.append("")
    return lines


# ------------------------------------------------------------------------------ loading models
def load_any(path: str, data: str, tasks: str):
    """(model, task) from a fairseq checkpoint (``fairseq-train``'s, trained on ``tasks`` of
    ``data``) or a bAbI report checkpoint (``{"model", "options"}``), on ``data``'s ``tasks``
    with train, valid and test loaded. The dictionary is rebuilt from the data, as training
    built it; a checkpoint that does not fit it is an error naming the file."""
    from fairseq_acvi.babi_eval.build import make_task
    obj = torch.load(path, map_location="cpu", weights_only=True)
    task = make_task(data, tasks)
    if isinstance(obj, dict) and "options" in obj and "model" in obj and "cfg" not in obj:
        from fairseq_acvi.babi_eval.checkpoint import load_model
        return load_model(path, task, obj["options"]["arch"], None), task
    from fairseq import checkpoint_utils
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task(
        [path], arg_overrides={"data": data, "babi_tasks": tasks})
    model = models[0]
    if model.vocab != len(task.source_dictionary):
        raise ValueError(f"{path}: model has {model.vocab} answer classes, the data "
                         f"{data} tasks {tasks} give {len(task.source_dictionary)}")
    return model, task


@torch.no_grad()
def predicted_symbols(model, dataset, samples: Optional[int] = None) -> List[str]:
    """The predicted answer symbols of ``dataset`` (``samples``: t-MEM-NN's draws, as
    :func:`~fairseq_acvi.babi_eval.evaluate.predict`)."""
    from fairseq_acvi.babi_eval.evaluate import predict
    pred = predict(model, dataset, samples)
    d = dataset.dictionary
    return [d[int(i)] for i in pred]


def main(argv=None):
    p = argparse.ArgumentParser(description="bAbI error breakdown of a checkpoint")
    p.add_argument("--path", required=True, help="fairseq checkpoint or bAbI report ckpt/*.pt")
    p.add_argument("--data", required=True, help="the bAbI folder the model was trained on")
    p.add_argument("--tasks", default="1", help="the tasks it was trained on (its dictionary)")
    p.add_argument("--subset", default="test", choices=["train", "valid", "test"])
    p.add_argument("--samples", type=int, default=None,
                   help="t-MEM-NN: posterior draws averaged (0: the mean); default the model's")
    p.add_argument("--out", default=None, help="write JSON here and markdown beside it (.md)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    model, task = load_any(args.path, args.data, args.tasks)
    ds = task.datasets[args.subset]
    samples = args.samples
    if samples is None and hasattr(model, "mc_samples"):
        samples = model.mc_samples
    result = breakdown(ds.examples, predicted_symbols(model, ds, samples))
    for w in result["wrong"]:              # file:line within --data (no folder of this machine)
        w["source"] = os.path.basename(w["source"])
    result["checkpoint"], result["subset"], result["samples"] = args.path, args.subset, samples
    md = markdown(result, f"{args.path}, {args.subset}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1, ensure_ascii=False)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
            f.write("\n".join(md))
    sys.stdout.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
