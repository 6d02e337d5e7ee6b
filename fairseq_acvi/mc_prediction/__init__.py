"""Monte-Carlo prediction: one place for how the predictions of S contexts become one
(docs/method.md §2.2; docs/uncertainty.md).

A stochastic context gives, per target step, S contexts — ACVI's K samples, variational
attention's N source positions — and the output layer turns each into a distribution over the
words. Everything that makes one prediction of them lives here, used by the LSTM decoder
(modules/seq2seq/context_decoder.py), the transformer (models/acvi_transformer.py), MC dropout
(modules/seq2seq/mc_dropout.py), ensembles (generation/uncertainty.py) and the memory networks:

* :mod:`~fairseq_acvi.mc_prediction.sampling` — how the K Gaussian samples are drawn (iid or
  antithetic, ``--mc-sampling``);
* :mod:`~fairseq_acvi.mc_prediction.combination` — the combination rules (the predictive average,
  the expected log-probability, the normalised geometric mean; ``--mc-combine``) and the average
  of equally weighted members;
* :mod:`~fairseq_acvi.mc_prediction.averaging` — the S contexts pushed through the output layer a
  chunk at a time under one memory budget, recomputed in the backward pass;
* :mod:`~fairseq_acvi.mc_prediction.uncertainty` — the per-sample terms of the uncertainty
  decomposition (predictive entropy, expected entropy, mutual information).
"""
