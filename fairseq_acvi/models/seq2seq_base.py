"""The base of the package's LSTM seq2seq models (docs/method.md §3): options, defaults, build hooks.

Every seq2seq model — translation (``acvi_lstm``, models/lstm_seq2seq.py), the pointer-generator
(``acvi_pointer_generator``) and the video captioner (``acvi_video_captioner``) — is an encoder
and one :class:`~fairseq_acvi.modules.seq2seq.context_decoder.ContextLSTMDecoder` with pluggable context
inference. :class:`ContextSeq2SeqModel` builds them the same way; a model overrides the hooks
where it differs::

    fill_defaults(args)                        its base architecture's defaults (unset options)
    build_encoder(args, task)                  -> encoder with .output_units (annotation size)
    build_target_embedding(args, task, enc)    -> the decoder's token embedding
    build_output_layer(args, task, emb, d_c)   -> the OutputLayer (modules/seq2seq/output_layers.py)
    decoder_options(args)                      -> extra ContextLSTMDecoder arguments (coverage)

and :meth:`ContextSeq2SeqModel.build_model` puts them together, hands the encoder the
evaluation-only ``--context-ablation`` and initialises every parameter (``--init-scale``,
modules/seq2seq/init.py). A new context-inference variant needs none of this (modules/context/); a new
seq2seq model is a subclass with its hooks and ``@register_model``.

Seed 003's configurations (docs/method.md §3.6), options of every model here, off by default
(old checkpoints, which lack them, load as trained): ``--attend-decoder-past`` (ii), the decoder
also attends over its own earlier outputs (modules/seq2seq/decoder_past.py), and
``--self-attention-heads H`` (iii), multi-head self-attention over the encoder's annotations
(added to the encoder by :meth:`ContextSeq2SeqModel.build_model`, so every encoder built on
:class:`~fairseq_acvi.modules.seq2seq.lstm_encoder.BiLSTMEncoder` has it) and causal self-attention over
the decoder's states (modules/seq2seq/context_decoder.py). Seed 003's Table 1 row "attn on encoder and
decoder + self-attention" is both options together.

Defaults: each option has one default — a model option in :data:`SEQ2SEQ_DEFAULTS`, a
context-inference option in its variant's ``DEFAULTS`` (modules/context/) — and argparse defaults
stay None, so that a model's base architecture can override some of them: a base architecture is
:func:`seq2seq_defaults` with its own overrides.
"""
from typing import Dict

from fairseq.models import FairseqEncoderDecoderModel
from fairseq.models.lstm import Embedding

from fairseq_acvi.modules.context import (add_context_args, check_options_apply,
                                          check_sample_count, fill_context_defaults,
                                          keep_predating_values)
from fairseq_acvi.modules.seq2seq.compiled_step import MODES, check_mode
from fairseq_acvi.modules.seq2seq.context_decoder import ContextLSTMDecoder
from fairseq_acvi.modules.seq2seq.init import DEFAULT_INIT_SCALE, add_init_args, init_uniform_
from fairseq_acvi.modules.seq2seq.lstm_encoder import ABLATIONS
from fairseq_acvi.modules.seq2seq.output_layers import OutputLayer, VocabularyOutput
from fairseq_acvi.modules.context.scorers import DEFAULT_INNER, INNER_SCORERS, SCORERS
from fairseq_acvi.modules.seq2seq.self_attention import check_heads

#: the package-wide default of every seq2seq model option (a model's base architecture overrides
#: some); the context-inference options' defaults are the variants' own (``DEFAULTS`` in
#: modules/context/, :func:`fill_context_defaults`)
SEQ2SEQ_DEFAULTS = dict(
    dropout=0.2, encoder_embed_dim=256, encoder_hidden_size=256, encoder_layers=2,
    decoder_embed_dim=256, decoder_hidden_size=256, decoder_layers=2,
    attention_type="multiplicative", attention_dim=256, key_value_inner=DEFAULT_INNER,
    share_decoder_input_output_embed=False,
    init_scale=DEFAULT_INIT_SCALE, context_ablation="none",
    max_source_positions=1024, max_target_positions=1024,
    attend_decoder_past=False, self_attention_heads=0, input_feeding=1,
    compile_decoder_step="none",
)


def add_seq2seq_args(parser):
    """Options shared by every LSTM seq2seq model of the package (defaults: SEQ2SEQ_DEFAULTS)."""
    parser.add_argument("--dropout", type=float, metavar="D", help="dropout probability")
    parser.add_argument("--encoder-embed-dim", type=int, metavar="N")
    parser.add_argument("--encoder-hidden-size", type=int, metavar="N",
                        help="encoder LSTM size per direction (annotations are 2N-d)")
    parser.add_argument("--encoder-layers", type=int, metavar="N")
    parser.add_argument("--decoder-embed-dim", type=int, metavar="N")
    parser.add_argument("--decoder-hidden-size", type=int, metavar="N")
    parser.add_argument("--decoder-layers", type=int, metavar="N")
    parser.add_argument("--decoder-out-embed-dim", type=int, metavar="N",
                        help="size of the attentional hidden state tanh(W_c[s; c]) "
                             "(default: --decoder-hidden-size)")
    parser.add_argument("--attention-type", choices=SCORERS, help="attention scorer (docs/method.md §1)")
    parser.add_argument("--attention-dim", type=int, metavar="N",
                        help="projection size of additive / scaled-dot scorers")
    parser.add_argument("--key-value-inner", choices=INNER_SCORERS,
                        help="with --attention-type key-value: the scorer of the keys "
                             "(docs/method.md §1; default multiplicative)")
    parser.add_argument("--share-decoder-input-output-embed", action="store_true")
    parser.add_argument("--input-feeding", type=int, choices=[0, 1], metavar="0|1",
                        help="1 (default, Luong et al.'s input feeding): the previous step's "
                             "attentional vector tanh(W_c[s; c]) is an input of the decoder LSTM; "
                             "0: it is not, so a teacher-forced pass runs the LSTM over all steps "
                             "in one fused call and the attention of every step at once, where "
                             "the context inference allows it (docs/method.md §3.7)")
    parser.add_argument("--compile-decoder-step", choices=MODES,
                        help="how a teacher-forced pass of the step loop (input feeding, "
                             "planning, coverage, constrained normalisers) runs each step: "
                             "none (default, eager), inductor (torch.compile's fused kernels), "
                             "reduce-overhead (the same, replayed as CUDA graphs on a GPU); "
                             "without input feeding the parallel path's whole pass; the same "
                             "values up to float rounding; compiled once per process "
                             "(modules/seq2seq/compiled_step.py)")
    parser.add_argument("--attend-decoder-past", action="store_true", default=None,
                        help="seed 003's configuration (ii): at each step the decoder also attends "
                             "over its own earlier outputs with a second scorer of the "
                             "--attention-type family, and that context joins the prediction "
                             "(docs/method.md §3.6; default off)")
    parser.add_argument("--self-attention-heads", type=int, metavar="H",
                        help="seed 003's configuration (iii): H-head self-attention over the "
                             "encoder's annotations (padding-masked) and causal H-head "
                             "self-attention over the decoder's states, residual + layer norm; "
                             "the attention to the source reads the self-attended states "
                             "(docs/method.md §3.6; 0 = off, the default; the seed uses 2)")
    add_init_args(parser)
    parser.add_argument("--context-ablation", choices=ABLATIONS,
                        help="evaluation only, for source-use diagnostics: replace every context "
                             "vector by zeros, or attend to another sentence's annotations "
                             "(shuffle); set it when decoding with --model-overrides "
                             "\"{'context_ablation': 'shuffle'}\"")
    add_context_args(parser)


def seq2seq_defaults(args, **overrides):
    """Fill the unset options of ``args``: ``overrides`` (a model's base architecture) first,
    then :data:`SEQ2SEQ_DEFAULTS` and the context-inference variants' defaults; the per-side
    dropouts from ``--dropout``, the attentional hidden size from the decoder's. Checks
    ``--context-ablation``, ``--mc-samples``, ``--attend-decoder-past`` (a switch),
    ``--key-value-inner`` (with the key-value scorer only),
    ``--self-attention-heads`` (a whole number ≥ 0 dividing the decoder's size) and that no
    option of another context inference is given (:func:`check_options_apply`). Options
    loaded from a checkpoint older than an option keep the value it was trained with
    (:func:`keep_predating_values`)."""
    keep_predating_values(args)
    if getattr(args, "context_inference", None) is None and "context_inference" in overrides:
        args.context_inference = overrides["context_inference"]
    check_options_apply(args)
    for key, value in dict(SEQ2SEQ_DEFAULTS, **overrides).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    fill_context_defaults(args)
    for key in ("encoder_dropout_in", "encoder_dropout_out", "decoder_dropout_in",
                "decoder_dropout_out"):
        if getattr(args, key, None) is None:
            setattr(args, key, args.dropout)
    if getattr(args, "decoder_out_embed_dim", None) is None:
        args.decoder_out_embed_dim = args.decoder_hidden_size
    if args.context_ablation not in ABLATIONS:
        raise ValueError(f"--context-ablation: unknown value {args.context_ablation!r}; choose "
                         f"from {', '.join(ABLATIONS)}")
    check_sample_count("--mc-samples", args.mc_samples)
    if args.input_feeding not in (0, 1) or isinstance(args.input_feeding, float):
        raise ValueError(f"--input-feeding must be 0 or 1, got {args.input_feeding!r}")
    if not isinstance(args.attend_decoder_past, bool):
        raise ValueError("--attend-decoder-past is a switch (True / False), got "
                         f"{args.attend_decoder_past!r}")
    check_heads(args.self_attention_heads, {"--decoder-hidden-size": args.decoder_hidden_size})
    check_mode(args.compile_decoder_step)
    inner = args.key_value_inner
    if inner != DEFAULT_INNER and args.attention_type != "key-value":
        raise ValueError(f"--key-value-inner {inner} applies to --attention-type "
                         f"key-value only, not {args.attention_type}")


def check_dictionary_sizes(model, state_dict):
    """Refuse a checkpoint whose embedding tables do not match the data's dictionaries."""
    for side, key in (("source", "encoder.embed_tokens.weight"),
                      ("target", "decoder.embed_tokens.weight")):
        module = model.encoder if side == "source" else model.decoder
        if key in state_dict and getattr(module, "dictionary", None) is not None:
            saved, have = state_dict[key].size(0), len(module.dictionary)
            if saved != have:
                raise ValueError(
                    f"mismatched {side} dictionary: the checkpoint was trained with {saved} "
                    f"symbols but the data's dict has {have}; use the dict.*.txt the model was "
                    "trained with (fairseq-preprocess --srcdict/--tgtdict)")


class ContextSeq2SeqModel(FairseqEncoderDecoderModel):
    """Encoder + :class:`ContextLSTMDecoder`, built from the hooks of the module docstring."""

    @staticmethod
    def add_args(parser):
        add_seq2seq_args(parser)

    # -- build hooks -------------------------------------------------------------------------------
    @classmethod
    def fill_defaults(cls, args):
        """The model's base architecture: fill the unset options of ``args``."""
        raise NotImplementedError

    @classmethod
    def build_encoder(cls, args, task):
        """-> a FairseqEncoder whose ``output_units`` is the size of its annotations and final
        states."""
        raise NotImplementedError

    @classmethod
    def build_target_embedding(cls, args, task, encoder):
        """-> the decoder's token embedding (fairseq's U(−0.1, 0.1) ``Embedding``)."""
        tgt_dict = task.target_dictionary
        return Embedding(len(tgt_dict), args.decoder_embed_dim, tgt_dict.pad())

    @classmethod
    def build_output_layer(cls, args, task, embed_tokens, context_dim: int) -> OutputLayer:
        """-> the softmax over the target dictionary, its weights tied to ``embed_tokens`` with
        ``--share-decoder-input-output-embed``."""
        layer = VocabularyOutput(args.decoder_out_embed_dim, len(task.target_dictionary),
                                 args.decoder_dropout_out)
        if args.share_decoder_input_output_embed:
            if args.decoder_embed_dim != args.decoder_out_embed_dim:
                raise ValueError("--share-decoder-input-output-embed needs --decoder-embed-dim "
                                 "== --decoder-out-embed-dim")
            layer.fc_out.weight = embed_tokens.weight
        return layer

    @classmethod
    def decoder_options(cls, args) -> Dict:
        """Extra keyword arguments of :class:`ContextLSTMDecoder` (coverage)."""
        return {}

    @classmethod
    def build_model(cls, args, task):
        cls.fill_defaults(args)
        encoder = cls.build_encoder(args, task)
        heads = getattr(args, "self_attention_heads", 0) or 0
        if heads:                              # seed 003's (iii), the encoder side
            check_heads(heads, {"the annotation size 2 × --encoder-hidden-size": encoder.output_units})
            encoder.add_self_attention(heads, args.encoder_dropout_out)
        embed = cls.build_target_embedding(args, task, encoder)
        decoder = ContextLSTMDecoder(
            args, task.target_dictionary, embed, value_dim=encoder.output_units,
            enc_final_dim=encoder.output_units,
            build_output_layer=lambda context_dim: cls.build_output_layer(args, task, embed,
                                                                          context_dim),
            **cls.decoder_options(args))
        model = cls(encoder, decoder)
        model.encoder.context_ablation = args.context_ablation
        return init_uniform_(model, args.init_scale)

    # -- what every seq2seq model does the same way ------------------------------------------------
    def training_inputs(self, sample: Dict) -> Dict:
        """``sample["net_input"]`` plus what the decoder needs from the gold target to score it
        (:meth:`ContextLSTMDecoder.training_inputs`): what the ``elbo`` criterion calls the model
        with, so that it never reads the decoder's internals."""
        return dict(sample["net_input"], **self.decoder.training_inputs(sample["target"]))

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return self.decoder.get_normalized_probs(net_output, log_probs, sample)

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        check_dictionary_sizes(self, state_dict)
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    def max_positions(self):
        return (self.encoder.max_positions(), self.decoder.max_positions())
