"""The LSTM encoder-decoder body shared by every seq2seq model of the package (docs/method.md §3):
the BiLSTM encoder (``lstm_encoder``, ``segmented_lstm``), the decoder with pluggable context
inference (``context_decoder``; its two passes over the steps ``decoder_passes``, the step loop's
step compiled ``compiled_step``; the context inference itself is :mod:`fairseq_acvi.modules.context`),
its output layers (``output_layers``, ``copy_generator``), seed 003's decoder options
(``decoder_past``, ``self_attention``), embeddings and initialisation, and MC dropout over the
whole model (``mc_dropout``)."""
