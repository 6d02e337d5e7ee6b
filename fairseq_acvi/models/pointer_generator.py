"""``acvi_pointer_generator``: pointer-generator with coverage for summarization (docs/method.md §3.1).

The seq2seq core (BiLSTM encoder, input-feeding LSTM decoder with pluggable context inference,
coverage) is the one of every seq2seq model (models/seq2seq_base.py); this model only changes

* the **embeddings**: one table shared by encoder and decoder (joined dictionary with the OOV
  position markers ``<unk-j>``); marker ids are embedded as ``<unk>`` (``MarkerEmbedding``,
  modules/seq2seq/embeddings.py);
* the **output layer** (``CopyOutput``, modules/seq2seq/output_layers.py): for every context c (the
  mean, or each Monte-Carlo sample)
      P_vocab = softmax(V' tanh(V [s_t; c] + b) + b')   over the real ids only (markers: 0)
      p_gen   = σ(w_cᵀ c + w_sᵀ s_t + w_xᵀ x_t + b_ptr)
      P(w)    = p_gen P_vocab(w) + (1 − p_gen) Σ_{i: x_i = w} a_ti              (float32)
  (``fairseq_acvi.modules.seq2seq.copy_generator``). With ACVI the K samples are averaged in probability
  space *after* mixing (docs/method.md §2.2: p_gen depends on c_t, so each sample has its own p_gen).
* **coverage** (``--coverage``): the decoder is always built with the coverage weight w_k of the
  additive scorer, so the parameter set is the same with and without coverage (a checkpoint of
  the coverage-free phases loads into the coverage phase, optimizer state included). Without
  ``--coverage`` no coverage vector is kept: the score has no w_k term (w_k gets no gradient) and
  there is no coverage loss. With it, k_t = Σ_{τ<t} a_τ enters the score and the loss
  Σ_i min(a_ti, k_ti) is returned (weight ``--coverage-weight`` of the ``elbo`` criterion).

**No-copy baseline** (``--no-copy``; See et al. 2017's "baseline" row, docs/method.md §3.1): the
same model without the copy mechanism. Per context c the output is
      P(w) = P_vocab(w)  for the real ids w < n_real,      P(<unk-j>) = 0  for the markers
(float32 log-softmax over the real ids; no clamp is needed). The decoder reads every marker id as
``<unk>``: on input (the embedding already does) and as a **gold target**, so a source OOV in a
summary (``<unk-j>``) is scored as ``<unk>`` and the baseline learns to emit ``<unk>`` for OOV
words; an OOV that is not in the source already is ``<unk>`` in the data. Nothing the model
computes depends on which source position holds which marker. **Decisions:**
  - no :class:`CopySwitch` is built (no p_gen parameters: a different model whose checkpoints do
    not load into the copy model or back; nothing unused for ``--ddp-backend`` to trip on);
  - the distribution the decoder returns (beam search, ``get_normalized_probs``) has
    log P = −inf at the markers, so a marker can never be decoded (``restore_oov`` would turn it
    into a copied word). The per-sample output (:class:`~fairseq_acvi.modules.seq2seq.output_layers.
    VocabularyOnlyOutput`) writes the copy mixture's floor log ε (ε = 1e-10,
    ``copy_generator.EPS``) there instead, so that combining samples never meets −inf
    (Σ_s w_s lp_s with a zero weight w_s would give NaN); −inf is put in after the combination
    (its ``finish``). Gold-token scoring never reads the marker block.
  ``--coverage`` and every context variant work as with copying (the attention still builds the
  context and the coverage loss). The option is a model argument, so ``fairseq-generate`` rebuilds
  the no-copy model from the checkpoint; pass it in every training phase.

Copy attention per variant (**decision**): the copy distribution of every sample uses the
decoder's attention a_t of that step (``StepOutput.attn``): for ``soft``/``ved`` the soft
attention, for ``structured`` the normalised CRF marginals, for ``acvi`` the mixture weights a_t
that generated the sample, for ``variational`` the *prior* a_t for every alignment sample (enum and
sample modes, and the ``exact`` decode). The alternative for variational attention, copying with a
hard alignment δ_{z} (P(w | z=i) = p_gen P_vocab + (1 − p_gen)[x_i = w]), would be the exact
latent-alignment copy model; we do not build it: it needs the sample→position identity that the
context interface does not expose, and with the prior marginalisation (``exact``) it reduces to
the same copy term Σ_i a_ti (1 − p_gen,i) [x_i = w]. Enumerating N alignments also costs
B·T·N·V memory, infeasible for N = 400, V = 50k: use ``--variational-mode sample`` there.

Preset: ``acvi_pointer_generator`` (See et al.'s CNN/DM model: 128-d embeddings, 256-d BiLSTM
per direction, 256-d decoder, additive attention of size 512, no dropout; ``_cnndm``, its old
second name, still loads: models/legacy_names.py). ACVI: its defaults, the configuration chosen
on Multi30K validation (``VALIDATED_CHOICE``, modules/context/acvi.py; on CNN/DM: level with soft,
docs/results/cnndm_pointer_generator_2026-11-26.md); the paper's set-up is ``--acvi-beta 1
--acvi-kl-delay-updates 0 --acvi-kl-warmup-updates 0 --acvi-value-norm none --mc-sampling iid``.
Train with ``--task pointer_summarization --criterion elbo`` (``recipes/summarization_cnndm.sh``;
the baseline: add ``--no-copy`` to its fairseq-train arguments).
"""
from fairseq.models import register_model, register_model_architecture

from fairseq_acvi.data.oov_markers import marker_id_range
from fairseq_acvi.models.seq2seq_base import ContextSeq2SeqModel, add_seq2seq_args, seq2seq_defaults
from fairseq_acvi.modules.seq2seq.embeddings import MarkerEmbedding
from fairseq_acvi.modules.seq2seq.lstm_encoder import BiLSTMEncoder
from fairseq_acvi.modules.seq2seq.output_layers import CopyOutput, VocabularyOnlyOutput


@register_model("acvi_pointer_generator")
class PointerGeneratorModel(ContextSeq2SeqModel):
    """BiLSTM encoder and decoder sharing one :class:`MarkerEmbedding`; the copy mixture (or,
    ``--no-copy``, the vocabulary softmax alone) as output layer; coverage (module docstring)."""

    @staticmethod
    def add_args(parser):
        add_seq2seq_args(parser)
        parser.add_argument("--coverage", action="store_true",
                            help="coverage k_t in the attention score and the coverage loss "
                                 "(docs/method.md §3.1; the final training phase)")
        parser.add_argument("--no-copy", action="store_true",
                            help="the no-copy baseline (See et al. 2017): P(w) = P_vocab(w), no "
                                 "copy switch; source OOVs (<unk-j>) in the target are scored as "
                                 "<unk>, and markers are never generated (docs/method.md §3.1)")

    @classmethod
    def fill_defaults(cls, args):
        base_architecture(args)
        if args.context_inference == "none":
            raise ValueError("--context-inference none: the pointer-generator (and its --no-copy "
                             "baseline) is an attention model; choose soft, acvi, structured, "
                             "variational or ved")
        if args.coverage and args.attention_type != "additive":
            raise ValueError(f"--coverage needs --attention-type additive (the w_k k_ti term of "
                             f"P 8), got {args.attention_type}")
        if args.share_decoder_input_output_embed:
            raise ValueError("--share-decoder-input-output-embed is not supported by the "
                             "pointer-generator (its output layer covers the real words only)")
        if args.encoder_embed_dim != args.decoder_embed_dim:
            raise ValueError("acvi_pointer_generator shares the source/target embedding: "
                             "--encoder-embed-dim must equal --decoder-embed-dim")

    @classmethod
    def build_encoder(cls, args, task):
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        if src_dict.symbols != tgt_dict.symbols:
            raise ValueError("acvi_pointer_generator needs one joined dictionary with the <unk-j> "
                             "markers for source and target (fairseq-preprocess --srcdict D "
                             "--tgtdict D; data_scripts/prepare_cnndm.sh)")
        first_marker, _ = marker_id_range(tgt_dict)
        embed = MarkerEmbedding(len(tgt_dict), args.decoder_embed_dim, tgt_dict.pad(),
                                first_marker, tgt_dict.unk())
        return BiLSTMEncoder(src_dict, args.encoder_embed_dim, args.encoder_hidden_size,
                             args.encoder_layers, args.encoder_dropout_in,
                             args.encoder_dropout_out, embed_tokens=embed,
                             max_positions=args.max_source_positions)

    @classmethod
    def build_target_embedding(cls, args, task, encoder):
        return encoder.embed_tokens                     # one table for source and target

    @classmethod
    def build_output_layer(cls, args, task, embed_tokens, context_dim):
        tgt_dict = task.target_dictionary
        n_real = embed_tokens.first_marker              # V', b' cover the real ids only
        if args.no_copy:   # no p_gen parameters at all (module docstring)
            return VocabularyOnlyOutput(args.decoder_out_embed_dim, n_real, len(tgt_dict),
                                        args.decoder_dropout_out, tgt_dict.unk())
        return CopyOutput(args.decoder_out_embed_dim, n_real, len(tgt_dict),
                          args.decoder_dropout_out, context_dim, args.decoder_hidden_size,
                          embed_tokens.embedding_dim)

    @classmethod
    def decoder_options(cls, args):
        # always build w_k (a constant parameter set across the training phases); use it only
        # with --coverage
        return dict(coverage=args.attention_type == "additive", use_coverage=args.coverage)


@register_model_architecture("acvi_pointer_generator", "acvi_pointer_generator")
def base_architecture(args):
    seq2seq_defaults(
        args, dropout=0.0, encoder_embed_dim=128, decoder_embed_dim=128, encoder_hidden_size=256,
        encoder_layers=1, decoder_hidden_size=256, decoder_layers=1, attention_type="additive",
        attention_dim=512, max_source_positions=401, max_target_positions=100,
        ved_latent_dim=128)   # docs/method.md §2.5: 128 for summarization
    for flag in ("coverage", "no_copy"):
        if getattr(args, flag, None) is None:
            setattr(args, flag, False)
