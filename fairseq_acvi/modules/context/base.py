"""The context-vector inference interface (docs/method.md §2) and its registry.

Every seq2seq decoder of the package calls one :class:`ContextInference` in the same way::

    prepared = ctx.prepare(mem, enc_final, target_emb, target_pad)   # once per batch
    state    = ctx.init_state(prepared, mem)                          # {} unless ctx.stateful
    extra_in = ctx.decoder_input(prepared)                            # (B, decoder_input_dim) or None
    for t in range(T):
        s_t   = lstm(...)                                             # (B, d_dec)
        e_t   = scorer(s_t, mem, coverage)                            # (B, N), -inf at padding
        out_t = ctx.step(e_t, s_t, mem, prepared, t)                  # StepOutput
        #       ctx.step(e_t, s_t, mem, prepared, t, state=state); state = out_t.state  (stateful)
        feed  = tanh(W_c [s_t; out_t.mean])                           # recurrent path uses the mean
    # after the loop, batched over all steps:
    out    = ctx.finish(stack_steps(steps), prepared)                # StepOutput, fields (B, T, ...)
    lprobs = combine(out.log_weights, log_softmax(output_layer(s, out.samples)))   # (B, T, V)
    losses = ctx.sequence_losses(out, log_prob_fn, target, prepared)  # target-dependent terms

Without input feeding (``--input-feeding 0``, docs/method.md §3.7) the queries s_1..s_T of a
teacher-forced pass do not depend on the contexts, and a ``parallel`` variant is asked for every
step at once instead of the loop (the same values up to float rounding)::

    e   = scorer(s, mem)                                              # s (B, T, d_dec) -> (B, T, N)
    out = ctx.finish(ctx.steps(e, s, mem, prepared), prepared)        # fields (B, T, ...)

``finish`` lets a variant do, once over all T steps, the work that the recurrence does not
need (ACVI: its posterior variance, the KL and the samples), instead of T small calls.
A variant therefore only decides *what the context is* (a point, K Monte-Carlo samples with
weights, or a full enumeration) and which extra loss terms it adds; it never sees the output layer,
the criterion or the beam search. Loss terms are unweighted per-example sums; the module's
:meth:`loss_weight` gives the current weight (β, warm-up, annealing), so that the ``elbo``
criterion stays generic: ``loss = NLL + Σ_name weight(name) · term(name)``.

Recurrent state (planning attention, docs/method.md §3.4): a variant with ``stateful = True`` carries
a dict of batch-first tensors from step to step. :meth:`init_state` gives the state before the
first step, ``step`` receives the current one as ``state=`` and returns the next one in
:attr:`StepOutput.state`. The decoder keeps it in its incremental state beside the LSTM state and
reorders it with the beam (``index_select`` on dim 0), so that a step decoded incrementally sees
exactly the state of the teacher-forced pass. Stateless variants (the default) are called without
``state`` and behave as before.

Shapes: B batch (× beam at inference), N source length, T target length, S samples, d_c context dim.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Optional

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_acvi.mc_prediction.combination import MC_COMBINE_CHOICES
from fairseq_acvi.mc_prediction.sampling import MC_SAMPLING_CHOICES
from fairseq_acvi.modules.context import normalizers
from fairseq_acvi.modules.context.scorers import DEFAULT_INNER, Memory, Scorer, build_scorer

CONTEXT_REGISTRY: Dict[str, type] = {}

#: K, the context samples averaged at evaluation and decoding unless --mc-samples says otherwise
DEFAULT_MC_SAMPLES = 10


def check_sample_count(name: str, value) -> int:
    """A number of Monte-Carlo samples (``--mc-samples``, ``--valid-mc-samples``), also when it
    comes from ``--model-overrides`` past argparse: a whole number ≥ 0 (not a string, a float or a
    bool), else a ValueError naming the option."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a whole number ≥ 0, got {value!r}")
    return value


def register_context(name: str):
    """Class decorator: make a variant selectable with ``--context-inference NAME``."""

    def wrap(cls):
        if name in CONTEXT_REGISTRY:
            raise ValueError(f"context inference {name!r} registered twice")
        cls.name = name
        CONTEXT_REGISTRY[name] = cls
        return cls

    return wrap


@dataclass
class StepOutput:
    """What one variant returns for one decoder step (or, stacked, for all steps: add a T dim).

    mean:        (B, d_c) context for the recurrent path (input feeding, next state)
    attn:        (B, N) float32 attention/alignment weights to report
    samples:     (B, S, d_c) contexts for the output layer; None means "just ``mean``" (S = 1)
    log_weights: (B, S) float32 log mixture weights over samples; None means uniform 1/S
    combine:     "prob"    -> predictive  log Σ_s w_s p_s(y)      (MC averaging, docs/method.md §2.2)
                 "logprob" -> expectation Σ_s w_s log p_s(y)      (exact E_q of an ELBO, §2.4 enum)
                 "geometric" -> log softmax_y Σ_s w_s log p_s(y)  (the normalised geometric mean,
                              ``--mc-combine geometric``; §2.2)
    losses:      name -> (B,) unweighted per-example loss terms of this step (e.g. "kl")
    aux:         name -> tensor, variant-private values that :meth:`sequence_losses` needs
    state:       name -> tensor, the recurrent state *after* this step (stateful variants only;
                 batch-first, reordered with the beam; not stacked by :func:`stack_steps`)
    """

    mean: Tensor
    attn: Tensor
    samples: Optional[Tensor] = None
    log_weights: Optional[Tensor] = None
    combine: str = "prob"
    losses: Dict[str, Tensor] = field(default_factory=dict)
    aux: Dict[str, Tensor] = field(default_factory=dict)
    state: Dict[str, Tensor] = field(default_factory=dict)

    def zeroed(self) -> "StepOutput":
        """The same step with the context (mean and samples) replaced by zeros (source-use
        diagnostics, ``--context-ablation zero``); attention, losses and state unchanged."""
        return StepOutput(mean=torch.zeros_like(self.mean), attn=self.attn,
                          samples=None if self.samples is None else torch.zeros_like(self.samples),
                          log_weights=self.log_weights, combine=self.combine, losses=self.losses,
                          aux=self.aux, state=self.state)


def stack_steps(steps) -> StepOutput:
    """Stack a list of per-step outputs along a new time dim 1: (B, ...) -> (B, T, ...).
    The recurrent ``state`` is not stacked: the result carries the last step's."""
    first = steps[0]

    def st(get):
        vals = [get(s) for s in steps]
        return None if vals[0] is None else torch.stack(vals, dim=1)

    return StepOutput(
        mean=st(lambda s: s.mean),
        attn=st(lambda s: s.attn),
        samples=st(lambda s: s.samples),
        log_weights=st(lambda s: s.log_weights),
        combine=first.combine,
        losses={k: st(lambda s, k=k: s.losses[k]) for k in first.losses},
        aux={k: st(lambda s, k=k: s.aux[k]) for k in first.aux},
        state=steps[-1].state,
    )


class ContextInference(nn.Module):
    """Base class of the variants. Subclasses set ``context_dim`` and override ``step``.

    Constructor arguments (all variants): ``args`` (the model's argparse namespace),
    ``value_dim`` (d of the memory values h_i), ``query_dim`` (d of s_t), ``enc_final_dim``
    (d of the final encoder state given to :meth:`prepare`).
    """

    name = "base"
    #: this class's options and their defaults — the one place each is set (a model's
    #: architecture may override some; :func:`fill_context_defaults`). Read with :meth:`option`.
    DEFAULTS: Dict[str, object] = {"context_inference": "soft", "mc_samples": DEFAULT_MC_SAMPLES,
                                   "mc_combine": "prob", **normalizers.DEFAULTS}
    #: the ``--attention-normalizer`` values this variant accepts (docs/method.md §3.5); a
    #: variant whose weights are not a normalised score vector keeps ("softmax",)
    NORMALIZERS = normalizers.NORMALIZERS
    #: extra features concatenated to every decoder input (VED's z); 0 for most variants
    decoder_input_dim: int = 0
    #: True when training needs the whole target (variational attention's inference network)
    needs_target: bool = False
    #: True when ``step`` takes and returns a recurrent state (``init_state``, StepOutput.state)
    stateful: bool = False
    #: True when :meth:`steps` computes every step of a teacher-forced pass at once: ``step``
    #: reads nothing of the earlier steps (a stateful variant or normaliser never does it)
    parallel: bool = False

    def __init__(self, args, value_dim: int, query_dim: int, enc_final_dim: int):
        super().__init__()
        self.value_dim = value_dim
        self.context_dim = value_dim
        self.num_updates = 0
        name = self.option(args, "attention_normalizer")
        if name in normalizers.NORMALIZERS and name not in self.NORMALIZERS:
            raise ValueError(f"--attention-normalizer {name} is not available with "
                             f"--context-inference {self.name} (it accepts "
                             f"{', '.join(self.NORMALIZERS)}; docs/method.md §3.5)")
        #: scores -> attention weights (``--attention-normalizer``; :meth:`normalize`)
        self.normalizer = normalizers.build_normalizer(type(self), args, value_dim)
        if self.normalizer.stateful:
            # the constrained normalisers carry the cumulative attention from step to step
            self.stateful = True

    @staticmethod
    def add_args(parser):
        """Options of this variant (all prefixed with the variant's name)."""

    @staticmethod
    def derive_defaults(args):
        """Set unset options whose default depends on another option given (before
        ``DEFAULTS`` fill the rest; :func:`fill_context_defaults`). Default: none."""

    @classmethod
    def option(cls, args, name: str):
        """``args.<name>``, or where it is unset (absent or None) the default in ``DEFAULTS`` of
        this class or of a base class."""
        value = getattr(args, name, None)
        if value is not None:
            return value
        for klass in cls.__mro__:
            if name in getattr(klass, "DEFAULTS", {}):
                return klass.DEFAULTS[name]
        raise KeyError(f"{cls.__name__} has no default for {name!r}")

    @classmethod
    def build_scorer(cls, args, query_dim: int, key_dim: int, coverage: bool = False) -> Scorer:
        """The attention scorer the decoder builds for this variant (docs/method.md §1):
        ``--attention-type`` (and ``--key-value-inner``) over ``key_dim``-d annotations, with the
        coverage term when ``coverage``. A variant that attends to nothing (``none``) returns a
        scorer without parameters."""
        return build_scorer(args.attention_type, query_dim, key_dim, args.attention_dim,
                            coverage=coverage,
                            inner=getattr(args, "key_value_inner", DEFAULT_INNER))

    # -- once per batch ------------------------------------------------------------------------
    def prepare(self, mem: Memory, enc_final: Tensor, target_emb: Optional[Tensor] = None,
                target_pad: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """Per-sentence state, batch-first tensors only (reordered with the beam).

        enc_final: (B, enc_final_dim); target_emb: (B, T, E) and target_pad: (B, T) bool, given
        only in training when ``needs_target``. The base class gives the normaliser's (the
        fertilities of the constrained ones, docs/method.md §3.5; {} for softmax); a variant that
        overrides it includes them.
        """
        return self.normalizer.prepare(mem)

    def decoder_input(self, prepared: Dict[str, Tensor]) -> Optional[Tensor]:
        return None

    def sentence_losses(self, prepared: Dict[str, Tensor]) -> Dict[str, Tensor]:
        """Per-sentence terms: name -> (B,)."""
        return {}

    def init_state(self, prepared: Dict[str, Tensor], mem: Memory) -> Dict[str, Tensor]:
        """The recurrent state before the first step: name -> batch-first tensor (B, ...).
        Only called for ``stateful`` variants; the others keep no state. The base class gives
        the constrained normaliser's cumulative attention β_0 = 0 (docs/method.md §3.5)."""
        return self.normalizer.init_state(prepared, mem)

    def normalize(self, scores: Tensor, mem: Memory, prepared: Dict[str, Tensor],
                  state: Optional[Dict[str, Tensor]] = None):
        """The step's attention weights under ``--attention-normalizer``: scores (B, N) (−inf at
        padding) -> (a_t (B, N) float32, exactly 0 at padding; the normaliser's next state, {}
        unless constrained). softmax is :func:`~fairseq_acvi.modules.context.scorers.masked_softmax`."""
        return self.normalizer(scores, mem, prepared, state)

    # -- once per decoder step -------------------------------------------------------------------
    def step(self, scores: Tensor, query: Tensor, mem: Memory,
             prepared: Dict[str, Tensor], t: int) -> StepOutput:
        """One decoder step. ``stateful`` variants take a keyword argument ``state`` (the dict
        of :meth:`init_state` or of the previous step's :attr:`StepOutput.state`) and return
        the next state in :attr:`StepOutput.state`. A ``parallel`` variant's step also takes
        every step at once (:meth:`steps`): scores (B, T, N), query (B, T, d), t ``slice(None)``."""
        raise NotImplementedError

    @property
    def runs_in_parallel(self) -> bool:
        """Whether :meth:`steps` may be used: a ``parallel`` variant that is not ``stateful``
        (a constrained normaliser makes any variant stateful)."""
        return self.parallel and not self.stateful

    def steps(self, scores: Tensor, query: Tensor, mem: Memory,
              prepared: Dict[str, Tensor]) -> StepOutput:
        """Every step of a teacher-forced pass at once (docs/method.md §3.7): scores (B, T, N)
        (−inf at padding), query (B, T, d) -> StepOutput with fields (B, T, ...), the values
        :func:`stack_steps` of the T single steps would hold (up to float rounding)."""
        if not self.runs_in_parallel:
            raise ValueError(f"--context-inference {self.name}"
                             + (" with a constrained --attention-normalizer" if self.parallel else "")
                             + " reads its earlier steps: it runs step by step")
        return self.step(scores, query, mem, prepared, slice(None))

    # -- once per batch, after the loop --------------------------------------------------------
    def finish(self, out: StepOutput, prepared: Dict[str, Tensor]) -> StepOutput:
        """The stacked steps (fields (B, T, ...), :func:`stack_steps`) -> the same with whatever
        the recurrent path does not need completed for all steps at once (samples, loss terms).
        Called once per forward, also when decoding incrementally (T = 1). Default: unchanged."""
        return out

    # -- once per batch, after the output layer --------------------------------------------------
    def sequence_losses(self, out: StepOutput, log_prob_fn: Callable[[Tensor], Tensor],
                        target: Tensor, prepared: Dict[str, Tensor]) -> Dict[str, Tensor]:
        """Target-dependent terms: name -> (B, T). ``log_prob_fn(ctx)`` maps contexts
        (B, T, S, d_c) to float32 log-probabilities of ``target`` (B, T, S)."""
        return {}

    # -- schedules ---------------------------------------------------------------------------------
    def set_num_updates(self, num_updates: int):
        self.num_updates = num_updates

    def loss_weight(self, name: str) -> float:
        return 1.0


def add_context_args(parser):
    """Add ``--context-inference`` and every registered variant's options to ``parser``."""
    parser.add_argument("--context-inference", choices=sorted(CONTEXT_REGISTRY),
                        help="how the context vector is inferred (docs/method.md §2; none: no "
                             "attention, the empty context)")
    parser.add_argument("--mc-samples", type=int, metavar="K",
                        help="Monte-Carlo samples of the context averaged at evaluation/decoding "
                             "(0 = use the mean; fairseq-generate: --model-overrides "
                             "\"{'mc_samples': K}\")")
    parser.add_argument("--mc-combine", choices=MC_COMBINE_CHOICES,
                        help="how the K samples' predictions are combined at evaluation/decoding: "
                             "prob, the predictive p̄(y) = (1/K) Σ_k p(y | c_k) (default, the papers' "
                             "Monte-Carlo average), or geometric, softmax_y of (1/K) Σ_k log p(y | c_k): "
                             "the normalised exp E_q[log p], the term the ELBO trains (docs/method.md §2.2)")
    parser.add_argument("--mc-sampling", choices=MC_SAMPLING_CHOICES,
                        help="how ACVI's K evaluation samples' Gaussian noise is drawn: antithetic "
                             "(default), ε_1..ε_⌈K/2⌉ and their negatives -ε: the same marginal "
                             "N(m, v) per sample, the sample mean exactly m for even K, and the "
                             "odd-order terms of the noise cancelled in the average (a variance "
                             "reduction; docs/method.md §2.2), or iid (the papers')")
    normalizers.add_normalizer_args(parser)
    for cls in CONTEXT_REGISTRY.values():
        cls.add_args(parser)


#: options added after checkpoints had been written without them, whose default in some preset is
#: not the value the model then had: option -> that value. A checkpoint's options were all filled by
#: the plugin that wrote it (``acvi_beta`` and ``mc_samples`` among them, whatever the variant),
#: and the command line defines every option (None when unset); so options that hold both but
#: lack one of these come from a checkpoint older than it, and
#: :func:`keep_predating_values` gives it the value the model was trained with instead of today's
#: default (``--acvi-value-norm``: ``layernorm`` in the Multi30K, summarization and
#: captioning presets since 2026-11-27 and ACVI's default since 2026-11-28, none before it existed;
#: ``--mc-sampling``: ``antithetic``
#: in the same presets since 2026-11-27, iid draws before).
PREDATING_VALUES = {"acvi_value_norm": "none", "mc_sampling": "iid"}


def keep_predating_values(args):
    """Options of a checkpoint older than an option of :data:`PREDATING_VALUES` get the value
    the model was trained with. Call before a base architecture fills its defaults."""
    if getattr(args, "acvi_beta", None) is None or getattr(args, "mc_samples", None) is None:
        return                                         # a command line, or not filled yet
    for key, value in PREDATING_VALUES.items():
        if not hasattr(args, key):
            setattr(args, key, value)


def fill_context_defaults(args):
    """Set every unset option of ``--context-inference``, ``--mc-samples`` and of every
    registered variant to its default (``DEFAULTS``; first :meth:`ContextInference.derive_defaults`),
    so that a checkpoint records them all."""
    for cls in CONTEXT_REGISTRY.values():
        cls.derive_defaults(args)
    for cls in (ContextInference, *CONTEXT_REGISTRY.values()):
        for key, value in cls.DEFAULTS.items():
            if getattr(args, key, None) is None:
                setattr(args, key, value)


#: options every variant's checkpoint records (filled by :func:`fill_context_defaults`) since the
#: first release: a namespace holding them all comes from a checkpoint, not a command line
_ALWAYS_FILLED = ("acvi_beta", "structured_lambda", "variational_mode", "ved_latent_dim")


def check_options_apply(args):
    """Refuse, on a command line, an option of a context inference other than the chosen one
    (``--acvi-beta`` with ``--context-inference soft`` would otherwise be ignored without a word).
    A checkpoint's options (every variant's, filled when it was trained) are not checked. Call
    before :func:`fill_context_defaults`."""
    if all(getattr(args, key, None) is not None for key in _ALWAYS_FILLED):
        return
    chosen = context_class(args)
    if getattr(args, "attention_normalizer", None) not in normalizers.CONSTRAINED:
        for key in ("attention_fertility", "attention_fertility_value", "attention_exhaustion"):
            if getattr(args, key, None) is not None:
                raise ValueError(f"--{key.replace('_', '-')} is an option of --attention-normalizer "
                                 f"{' / '.join(normalizers.CONSTRAINED)}, not of "
                                 f"{getattr(args, 'attention_normalizer', None) or 'softmax'}: "
                                 "remove it, or choose a constrained normaliser")
    own = {key for klass in chosen.__mro__ for key in getattr(klass, "DEFAULTS", {})}
    for cls in CONTEXT_REGISTRY.values():
        for key in cls.DEFAULTS:
            if key not in own and getattr(args, key, None) not in (None, False):
                owners = sorted(n for n, c in CONTEXT_REGISTRY.items() if key in c.DEFAULTS)
                raise ValueError(
                    f"--{key.replace('_', '-')} is an option of --context-inference "
                    f"{' / '.join(owners)}, not of {chosen.name}: remove it, or choose "
                    f"--context-inference {owners[0]}")


def context_class(args) -> type:
    """The :class:`ContextInference` subclass ``--context-inference`` names (default soft)."""
    name = ContextInference.option(args, "context_inference")
    if name not in CONTEXT_REGISTRY:
        raise ValueError(f"--context-inference: unknown value {name!r}; choose from "
                         f"{', '.join(sorted(CONTEXT_REGISTRY))}")
    return CONTEXT_REGISTRY[name]


def build_context(args, value_dim: int, query_dim: int, enc_final_dim: int) -> ContextInference:
    return context_class(args)(args, value_dim, query_dim, enc_final_dim)
