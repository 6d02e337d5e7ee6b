"""Summarization evaluation (docs/method.md §3.1, §5): the evaluator (``scoring``), the lead-k
baseline (``lead``) and the report's parts (``report``), behind the commands
``fairseq_acvi.cli.eval_summarization``, ``lead_baseline`` and ``summ_report``; the CNN/DM runs of
the attention normalisers (``normalizer_runs``, §3.5) behind ``normalizers_report``."""
