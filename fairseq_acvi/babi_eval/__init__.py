"""The bAbI report's protocol (docs/method.md §4-5) as a library, one job per module.

``python -m fairseq_acvi.cli.babi_report`` (fairseq_acvi/cli/babi_report.py: its options and
``main``) trains and tests MemN2N and t-MEM-NN on bAbI, keeps the best run by validation and
writes a report beside the published tables. Its parts live here, outside ``cli/``, because they
are not command-line code: the tests and other scripts call them directly, and ``cli/`` holds one
module per command (fairseq_acvi/cli/__init__.py). The package is not called ``babi_report`` so
that the name stays the command's.

* :mod:`.build` — the task and the model of a run from the command line's options (the options
  a model is built with, :func:`~.build.model_options`, are what a checkpoint carries).
* :mod:`.train` — one run (the training loop, per-epoch validation, the best epoch kept) and a
  setup (every seed of every model, the chosen run saved, results appended to the JSON file).
* :mod:`.evaluate` — predictions, test accuracy per task, t-MEM-NN's uncertainty, the
  validation score that selection uses.
* :mod:`.selection` — the order of runs by validation (:func:`~.selection.selection_key`) and
  ``--merge`` of runs over disjoint seed ranges.
* :mod:`.checkpoint` — the chosen runs' checkpoints: saved with their model options, rebuilt
  from them (old plain state dicts through a fallback that reads the options off weight shapes).
* :mod:`.results` — the results_<setup>.json files and the data variant they record.
* :mod:`.errors` — where a model's answers go wrong: by answer, answer form (one word or
  several, verbatim in the supporting fact or not), question wording and supporting statement,
  and the confusion matrix; ``python -m fairseq_acvi.babi_eval.errors`` on a checkpoint.
* :mod:`.render` — babi_report.md (tables beside fairseq_acvi/published.py's, selection,
  uncertainty, ν, per-hop attention) and the bar charts.
"""
