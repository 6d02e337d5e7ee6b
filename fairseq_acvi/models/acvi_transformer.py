"""``acvi_transformer``: fairseq's transformer with the encoder-decoder attention's context inferred
per head by the package's context inference (docs/method.md §2.6).

Everything but the encoder-decoder attention is fairseq's own (``fairseq.models.transformer``): the
encoder, the decoder's embeddings, self-attention, FFNs, layer norms and output projection, their
initialisation and state-dict names. The encoder-decoder attention of each decoder layer is a
:class:`~fairseq_acvi.modules.transformer_context.ContextMultiheadAttention`:

* ``--context-inference soft``: fairseq's attention; the model *is* fairseq's ``transformer``
  (a stock ``transformer`` state dict loads into it and gives the same outputs);
* ``--context-inference acvi``: per head, ACVI's Gaussian context and its KL (§2.2 per head),
  with every ``--acvi-*`` option of the LSTM (β, delay, warm-up, cycles, free bits, mean,
  log σ² depth and initialisation). ``--acvi-latent-layers all`` (default) makes every decoder
  layer's context latent, ``last`` only the top layer's. At evaluation the lower layers use their
  mean context and the top layer averages the predictive distribution over K = ``--mc-samples``
  samples (D 88; one batched pass of the top layer's remainder and the output projection over a
  K dim; K = 0: the mean, i.e. soft attention on μ).

The decoder returns ``(lprobs, extra)``: ``lprobs`` (B, T, V) float32 log-probabilities (already
normalised and MC-averaged; ``get_normalized_probs`` only exponentiates, like the LSTM decoder's)
and ``extra = {"attn": [(B, T, N)], "inner_states": [...], "losses": {name: (sum, weight)}}`` for
the ``elbo`` criterion (the KL summed over heads and latent layers, per target token).

Presets: ``acvi_transformer`` (fairseq's ``transformer`` base sizes), ``acvi_transformer_iwslt_de_en``
(fairseq's ``transformer_iwslt_de_en``: 6+6 layers, 512-d, FFN 1024, 4 heads) and
``acvi_transformer_multi30k``, sized for a CPU: 3+3 layers, 256-d, FFN 1024, 4 heads, dropout 0.3,
shared decoder input/output embeddings. ACVI's defaults in all three are the configuration chosen
on Multi30K (modules/context/acvi.py: β = 1e-4, KL off for 234 updates, then a 117-update warm-up,
antithetic evaluation samples) without the annotations' normalisation (``--acvi-value-norm none``:
the values are per-head projections of the encoder's layer-normalised output). Train with
``--task translation --criterion elbo [--label-smoothing 0.1]`` (``recipes/mt_transformer_multi30k.sh``).
"""

from fairseq import utils
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerDecoder, TransformerModel
from fairseq.models.transformer.transformer_legacy import (
    base_architecture as fairseq_transformer_base,
    transformer_iwslt_de_en as fairseq_transformer_iwslt_de_en,
)
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase

from fairseq_acvi.mc_prediction import averaging as mc
from fairseq_acvi.modules.context import (add_context_args, check_options_apply,
                                          check_sample_count, fill_context_defaults,
                                          keep_predating_values)
from fairseq_acvi.modules.transformer_context import (
    AVERAGED_TERMS, TRANSFORMER_VARIANTS, ContextMultiheadAttention)


LATENT_LAYERS = ("all", "last")


class ACVITransformerDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer with a :class:`ContextMultiheadAttention` as its encoder-decoder
    attention. When that attention returns K samples (T, B, K, D), the residual (T, B, D) is
    broadcast over K, so the layer's remainder (dropout, residual, layer norms, FFN) runs on
    (T, B, K, D) in one pass."""

    def __init__(self, cfg, ctx_args, latent: bool, no_encoder_attn=False):
        self._ctx_args, self._latent = ctx_args, latent   # read by build_encoder_attention
        super().__init__(cfg, no_encoder_attn)

    def build_encoder_attention(self, embed_dim, cfg):
        return ContextMultiheadAttention(
            embed_dim, cfg.decoder.attention_heads, self._ctx_args, self._latent,
            kdim=cfg.encoder.embed_dim, vdim=cfg.encoder.embed_dim, dropout=cfg.attention_dropout,
            q_noise=self.quant_noise, qn_block_size=self.quant_noise_block_size)

    def residual_connection(self, x, residual):
        if x.dim() == residual.dim() + 1:          # x (T, B, K, D), residual (T, B, D)
            residual = residual.unsqueeze(2)
        return residual + x


class ACVITransformerDecoder(TransformerDecoder):
    """fairseq's transformer decoder over :class:`ACVITransformerDecoderLayer` layers; returns
    float32 log-probabilities (MC-averaged over the top layer's K samples) and the latent loss
    terms (module docstring)."""

    def __init__(self, args, dictionary, embed_tokens, no_encoder_attn=False):
        self.ctx_args = args
        self._layers_built = 0
        super().__init__(args, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn)
        adapters = [layer.encoder_attn for layer in self.layers
                    if isinstance(getattr(layer, "encoder_attn", None), ContextMultiheadAttention)]
        if adapters:
            adapters[-1].sample_output = True
        #: the adapters with a latent (ACVI) context, bottom to top (a plain list: they are
        #: registered as submodules of their layers)
        self.latent_attn = [a for a in adapters if a.acvi is not None]

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        index = self._layers_built
        self._layers_built += 1
        mode = getattr(self.ctx_args, "acvi_latent_layers", "all")
        latent = mode == "all" or index == cfg.decoder.layers - 1
        return ACVITransformerDecoderLayer(cfg, self.ctx_args, latent, no_encoder_attn)

    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None,
                features_only: bool = False, full_context_alignment: bool = False,
                alignment_layer=None, alignment_heads=None, src_lengths=None,
                return_all_hiddens: bool = False, **unused):
        """prev_output_tokens (B, T) -> (log-probs (B, T', V) float32, extra); T' = 1 when
        decoding incrementally. ``features_only``: the top layer's features (B, T', D), or
        (B, T', K, D) when it sampled K contexts."""
        for attn in self.latent_attn:
            attn.latent_losses = {}
        x, extra = self.extract_features(
            prev_output_tokens, encoder_out=encoder_out, incremental_state=incremental_state,
            full_context_alignment=full_context_alignment, alignment_layer=alignment_layer,
            alignment_heads=alignment_heads)
        extra["losses"] = {} if incremental_state is not None else self._losses(prev_output_tokens)
        if features_only:
            return x, extra
        return self.mc_log_probs(x), extra

    def mc_log_probs(self, x):
        """Output layer and predictive average (D 88), float32 in log space:
        x (B, T, D) -> log softmax (B, T, V);  x (B, T, K, D) -> log (1/K) Σ_k softmax_k (B, T, V),
        or under ``--mc-combine geometric`` log softmax_V((1/K) Σ_k log softmax_k) (§2.2).
        The K samples go through the output projection together, in chunks of samples when
        B·T·K·V exceeds the budget of :mod:`fairseq_acvi.mc_prediction.averaging`."""
        if x.dim() == 4 and x.size(2) == 1:     # one sample: nothing to average
            x = x.squeeze(2)
        if x.dim() == 3:
            return utils.log_softmax(self.output_layer(x), dim=-1)
        # the top latent layer's context (the one that sampled the K) holds --mc-combine
        return mc.average(lambda i, j: utils.log_softmax(self.output_layer(x[:, :, i:j]), dim=-1),
                          x, len(self.dictionary), None, self.latent_attn[-1].acvi.mc_combine)

    def _losses(self, prev_output_tokens):
        """The latent layers' per-token terms (B, T), summed over layers (``ctx_var`` and
        ``ctx_norm2``: averaged), over non-padding target tokens: name -> (sum, weight)."""
        if not self.latent_attn:
            return {}
        nonpad = prev_output_tokens.ne(self.padding_idx)
        totals = {}
        for attn in self.latent_attn:
            for name, t in attn.latent_losses.items():
                totals[name] = t if name not in totals else totals[name] + t
        acvi = self.latent_attn[0].acvi
        n = len(self.latent_attn)
        losses = {}
        for name, t in totals.items():
            if name in AVERAGED_TERMS or name == "ctx_norm2":
                t = t / n
            losses[name] = ((t * nonpad).sum(), acvi.loss_weight(name))
        return losses

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        lprobs = net_output[0].float()
        return lprobs if log_probs else lprobs.exp()

    def get_normalized_probs_scriptable(self, net_output, log_probs, sample=None):
        return self.get_normalized_probs(net_output, log_probs, sample)


@register_model("acvi_transformer")
class ACVITransformerModel(TransformerModel):
    """fairseq's ``transformer`` with per-head context inference in its encoder-decoder attention
    (module docstring; docs/method.md §2.6)."""

    _ctx_args = None   # the argparse namespace while build_model runs (build_decoder needs it)

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        add_context_args(parser)
        parser.add_argument("--acvi-latent-layers", choices=LATENT_LAYERS,
                            help="decoder layers whose encoder-decoder context is latent (acvi): "
                                 "all (default) or only the top one")

    @classmethod
    def build_model(cls, args, task):
        base_architecture(args)
        if args.context_inference not in TRANSFORMER_VARIANTS:
            raise ValueError(f"acvi_transformer: --context-inference must be one of "
                             f"{', '.join(TRANSFORMER_VARIANTS)}, got {args.context_inference!r}")
        if getattr(args, "adaptive_softmax_cutoff", None):
            raise ValueError("acvi_transformer does not support --adaptive-softmax-cutoff")
        if getattr(args, "cross_self_attention", False):
            raise ValueError("acvi_transformer does not support --cross-self-attention")
        if getattr(args, "context_ablation", None) not in (None, "none"):
            raise ValueError("acvi_transformer does not support --context-ablation (LSTM models only)")
        check_sample_count("--mc-samples", args.mc_samples)
        cls._ctx_args = args
        try:
            return super().build_model(args, task)
        finally:
            cls._ctx_args = None

    @classmethod
    def build_decoder(cls, cfg, tgt_dict, embed_tokens):
        args = cls._ctx_args
        return ACVITransformerDecoder(args, tgt_dict, embed_tokens,
                                      no_encoder_attn=getattr(args, "no_cross_attention", False))


def context_defaults(args, **defaults):
    """Fill the unset context-inference options: explicit ``defaults`` first, then
    ``--acvi-latent-layers all``, ``--acvi-value-norm none`` (the values are projections of a
    layer-normalised output already) and the variants' own defaults (modules/context/); options from
    a checkpoint older than an option keep the value it was trained with, as for the LSTM
    models (:func:`keep_predating_values`)."""
    keep_predating_values(args)
    check_options_apply(args)
    for key, value in dict(dict(acvi_latent_layers="all", acvi_value_norm="none"), **defaults).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    fill_context_defaults(args)


@register_model_architecture("acvi_transformer", "acvi_transformer")
def base_architecture(args):
    context_defaults(args)
    fairseq_transformer_base(args)


@register_model_architecture("acvi_transformer", "acvi_transformer_iwslt_de_en")
def acvi_transformer_iwslt_de_en(args):
    context_defaults(args)
    fairseq_transformer_iwslt_de_en(args)


@register_model_architecture("acvi_transformer", "acvi_transformer_multi30k")
def acvi_transformer_multi30k(args):
    # ACVI's defaults as in every preset (context_defaults): on Multi30K at max-tokens 4000 the
    # KL is off for 2 epochs, then a one-epoch linear warm-up to β = 1e-4
    context_defaults(args)
    for key, value in dict(encoder_embed_dim=256, encoder_ffn_embed_dim=1024,
                           encoder_attention_heads=4, encoder_layers=3, decoder_embed_dim=256,
                           decoder_ffn_embed_dim=1024, decoder_attention_heads=4, decoder_layers=3,
                           dropout=0.3, share_decoder_input_output_embed=True).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    fairseq_transformer_base(args)


#: fairseq ``transformer`` options giving the ``acvi_transformer_multi30k`` sizes (the recipe's
#: and the tests' baseline)
MULTI30K_FAIRSEQ_ARGS = ("--encoder-embed-dim 256 --encoder-ffn-embed-dim 1024 "
                         "--encoder-attention-heads 4 --encoder-layers 3 --decoder-embed-dim 256 "
                         "--decoder-ffn-embed-dim 1024 --decoder-attention-heads 4 "
                         "--decoder-layers 3 --dropout 0.3 --share-decoder-input-output-embed")
