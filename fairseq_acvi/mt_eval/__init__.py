"""The translation report (``python -m fairseq_acvi.cli.mt_report``, fairseq_acvi/cli/mt_report.py:
its options and ``main``) as a library, one job per module, as :mod:`fairseq_acvi.babi_eval` is
for bAbI: the tests and other scripts call these directly, and ``cli/`` holds one module per command.

* :mod:`.logs` — the stock CLIs' logs of a run: ``fairseq-train``'s per-epoch records, parameter
  count and "done training" line, ``fairseq-validate``'s record; :class:`~.logs.ReportError`.
* :mod:`.runs` — one run folder read into a dict (its named splits: ``splits`` of run.json, else
  Multi30K's) (best epoch, KL diagnostics, BLEU of every decode,
  source use, the Monte-Carlo sweep), the folders under a root, the runs of earlier reports
  (``--merge``).
* :mod:`.summary` — mean ± std over seeds per pair and variant (finished runs only), seed-by-seed
  paired differences, ``--compare``.
* :mod:`.render` — ``report.md`` and the PNG charts.
* :mod:`.kept_outputs` — the hypotheses and scores kept beside a report (``--keep-outputs``).
* :mod:`.paired_decodes` — two runs' decodes of a split compared sentence by sentence (their
  hypotheses and references read, the paired bootstrap of BLEU).
* :mod:`.run_intervals` — those intervals between two variants of a report, seed by seed and split
  by split (``--intervals``).
* :mod:`.seed003_grid` — seed 003's Table 1 beside the attention grid
  (``python -m fairseq_acvi.cli.attention_grid_report``); :mod:`.seed003_grid_markdown` writes it.
* :mod:`.normalizer_table` — the attention normalisers' BLEU and attention statistics
  (``python -m fairseq_acvi.cli.normalizers_report``).
* :mod:`.reuse_run` — a finished default run counted under another tag (the softmax rows of
  recipes/mt_normalizers.sh, ``SOFTMAX_FROM``), after checking it is that model and budget.
"""
from fairseq_acvi.mt_eval.logs import (
    ReportError, likelihood_bits, model_parameters, parse_train_log, parse_validate_log,
    training_finished, training_wall)
from fairseq_acvi.mt_eval.kept_outputs import keep_outputs
from fairseq_acvi.mt_eval.render import charts, default_title, fmt, markdown, own_corpus, variant_order
from fairseq_acvi.mt_eval.runs import (
    ABLATIONS, SPLITS, STOCHASTIC_CONTEXTS, combine_runs, default_mc_samples, find_runs,
    load_merged, mc_sweep, pair_splits, read_run, run_splits, source_use)
from fairseq_acvi.mt_eval.summary import (
    PAIRED_BASE, aggregate, base_candidates, compare, is_finished, mean_std, paired, paired_base,
    wps_device)

__all__ = [
    "ReportError", "likelihood_bits", "model_parameters", "parse_train_log", "parse_validate_log",
    "training_finished", "training_wall", "charts", "default_title", "fmt", "markdown", "own_corpus",
    "variant_order", "ABLATIONS", "SPLITS", "STOCHASTIC_CONTEXTS", "combine_runs",
    "default_mc_samples", "find_runs", "load_merged", "mc_sweep", "pair_splits", "read_run",
    "run_splits", "source_use", "PAIRED_BASE", "aggregate",
    "base_candidates", "compare", "is_finished", "mean_std", "paired", "paired_base", "wps_device",
    "keep_outputs"]
