"""Variational attention of Deng et al. 2018 (docs/method.md §2.4).

The alignment z_t ∈ {1..N} is a categorical latent variable with
    prior      p(z_t = i) = a_ti = softmax_i(e_ti)        (the decoder's soft attention)
    posterior  q(z_t = i) = q_ti = softmax_i(g_tᵀ W h_i)   (inference network)
where g_t (B, T, D) is the output of a BiLSTM reading the embeddings of the whole true target
(``target_emb``, right-padded) and W a bilinear map; padded source positions get q = a = 0.
Training maximises, per step,
    ELBO_t = E_q[log p(y_t | s_t, h_z)] − KL(q_t || a_t),
the KL being exact: step loss ``kl`` = Σ_i q_ti (log q_ti − log a_ti), float32, 0 at padding.

Modes (``--variational-mode``):
  enum    exact expectation: the output layer sees every h_i (samples (B, N, d), log weights
          log q_t, combine "logprob" -> Σ_i q_ti log p(y_t | h_i)).
  sample  one z_t ~ q_t, samples = h_z (B, 1, d); the decoder's NLL gives the pathwise part and
          :meth:`sequence_losses` adds the score-function (REINFORCE) surrogate
              reinforce_t = −[log p(y_t | h_z) − b_t] · log q_t(z_t)   (bracket detached)
          whose gradient is the estimator −(log p − b) ∇ log q(z); the baseline
          b_t = log p(y_t | c_soft), c_soft = Σ_i a_ti h_i, is trained by its own NLL
          (``baseline_nll`` = −b_t).
The recurrent path (input feeding) always uses the prior mean c_soft, in training and decoding,
so that training and decoding run the same recurrence.

Decoding uses the prior (no target): ``--variational-decode soft`` (default) gives c_soft;
``exact`` marginalises over the prior: samples h_i with log weights log a_t, combine "prob"
(log Σ_i a_ti p(y | h_i)).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from fairseq_acvi.modules.context.base import ContextInference, StepOutput, register_context
from fairseq_acvi.modules.context.soft import attend
from fairseq_acvi.modules.precision import at_least_float32

MODES = ("enum", "sample")
DECODES = ("soft", "exact")


def categorical_kl(log_q, log_p, pad_mask):
    """KL(q || p) = Σ_i q_i (log q_i − log p_i) over the last dim, float32; padded positions
    (pad_mask True, where both log-probabilities are −inf) contribute exactly 0.
    log_q, log_p: (..., N); pad_mask: (..., N) bool -> (...)."""
    log_q = at_least_float32(log_q).masked_fill(pad_mask, 0.0)
    log_p = at_least_float32(log_p).masked_fill(pad_mask, 0.0)
    q = log_q.exp().masked_fill(pad_mask, 0.0)
    return (q * (log_q - log_p)).sum(-1)


@register_context("variational")
class VariationalContext(ContextInference):
    parallel = True
    DEFAULTS = dict(variational_mode="enum", variational_decode="soft", variational_beta=1.0)
    needs_target = True
    #: the prior a_t must be positive wherever the posterior q_t is: KL(q ‖ a) is infinite under a
    #: sparse prior (docs/method.md §3.5)
    NORMALIZERS = ("softmax",)

    def __init__(self, args, value_dim, query_dim, enc_final_dim):
        super().__init__(args, value_dim, query_dim, enc_final_dim)
        self.mode = self.option(args, "variational_mode")
        self.decode = self.option(args, "variational_decode")
        if self.mode not in MODES:
            raise ValueError(f"--variational-mode: unknown value {self.mode!r}; choose from "
                             f"{', '.join(MODES)}")
        if self.decode not in DECODES:
            raise ValueError(f"--variational-decode: unknown value {self.decode!r}; choose from "
                             f"{', '.join(DECODES)}")
        self.beta = self.option(args, "variational_beta")
        if not 0 <= self.beta < float("inf"):
            raise ValueError(f"--variational-beta must be ≥ 0, got {self.beta}")
        emb_dim = getattr(args, "variational_target_dim", None) or getattr(args, "decoder_embed_dim", None)
        if not emb_dim:
            raise ValueError("variational attention: the inference network needs the target "
                             "embedding size; the model must set args.decoder_embed_dim "
                             "(or --variational-target-dim)")
        dim = getattr(args, "variational_inference_dim", None) or value_dim
        if dim % 2:
            raise ValueError(f"--variational-inference-dim must be even (BiLSTM), got {dim}")
        self.inference_rnn = nn.LSTM(emb_dim, dim // 2, batch_first=True, bidirectional=True)
        self.bilinear = nn.Linear(dim, value_dim, bias=False)        # g_tᵀ W h_i = (W g_t)·h_i

    @staticmethod
    def add_args(parser):
        parser.add_argument("--variational-mode", choices=list(MODES),
                            help="training estimator of E_q log p(y|h_z): enum (exact, default) "
                                 "or sample (REINFORCE with the soft-attention baseline)")
        parser.add_argument("--variational-decode", choices=list(DECODES),
                            help="decoding with the prior: soft (prior-mean context, default) or "
                                 "exact (log Σ_i a_i p(y|h_i))")
        parser.add_argument("--variational-inference-dim", type=int, metavar="D",
                            help="output size of the inference BiLSTM over the target "
                                 "(D/2 per direction; default: the memory value size)")
        parser.add_argument("--variational-target-dim", type=int, metavar="E",
                            help="size of the target embeddings read by the inference network "
                                 "(default: --decoder-embed-dim)")
        parser.add_argument("--variational-beta", type=float, metavar="B",
                            help="weight of the KL(q||a) term (default 1)")

    # -- inference network ---------------------------------------------------------------------
    def posterior_logits(self, mem, target_emb, target_pad):
        """Inference network: (B, T, E) target embeddings -> log q (B, T, N) float32, −inf at
        padded source positions. ``target_pad`` (B, T) must be right-padded."""
        B, T, _ = target_emb.shape
        lengths = (~target_pad).long().sum(1)
        expected = torch.arange(T, device=target_pad.device).unsqueeze(0) >= lengths.unsqueeze(1)
        if not torch.equal(expected, target_pad):
            raise ValueError("variational attention: target_pad must mark a right-padded target "
                             "(padding only after the last real token)")
        if bool((lengths == 0).any()):
            raise ValueError("variational attention: a target of length 0 in the batch")
        packed = pack_padded_sequence(target_emb, lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        g, _ = self.inference_rnn(packed)
        g, _ = pad_packed_sequence(g, batch_first=True, total_length=T)  # (B, T, D)
        logits = torch.bmm(self.bilinear(g), mem.values.transpose(1, 2))  # (B, T, N)
        logits = at_least_float32(logits).masked_fill(mem.pad_mask.unsqueeze(1), float("-inf"))
        return F.log_softmax(logits, dim=-1)

    def prepare(self, mem, enc_final, target_emb=None, target_pad=None):
        if not self.training:
            return {}
        if target_emb is None or target_pad is None:
            raise RuntimeError("variational attention: training needs the target (the decoder "
                               "must pass target_emb and target_pad to prepare() when "
                               "needs_target is True)")
        return {"var_log_q": self.posterior_logits(mem, target_emb, target_pad)}

    # -- per step --------------------------------------------------------------------------------
    def step(self, scores, query, mem, prepared, t):
        """One step: scores (B, N) -> fields (B, ...); every step at once (``t`` a slice):
        scores (B, T, N) -> fields (B, T, ...), the samples h_i a (B, T, N, d) view."""
        log_a = F.log_softmax(at_least_float32(scores), dim=-1)        # (B, [T,] N), -inf at padding
        a = log_a.exp()
        soft = attend(a, mem.values)                                   # prior mean context (B, [T,] d)
        every = mem.values if scores.dim() == 2 else mem.values.unsqueeze(1).expand(
            -1, scores.size(1), -1, -1)                                # all h_i: (B, [T,] N, d)
        if not self.training:
            if self.decode == "soft":
                return StepOutput(mean=soft, attn=a)
            return StepOutput(mean=soft, attn=a, samples=every, log_weights=log_a,
                              combine="prob")
        if "var_log_q" not in prepared:
            raise RuntimeError("variational attention: step() in training without the posterior "
                               "(prepare() was called in eval mode or without the target)")
        log_q = prepared["var_log_q"][:, t]                            # (B, [T,] N)
        pad = mem.pad_mask if scores.dim() == 2 else mem.pad_mask.unsqueeze(1)
        losses = {"kl": categorical_kl(log_q, log_a, pad)}
        if self.mode == "enum":
            return StepOutput(mean=soft, attn=a, samples=every, log_weights=log_q,
                              combine="logprob", losses=losses)
        N, d = log_q.size(-1), mem.values.size(-1)
        z = torch.multinomial(log_q.detach().exp().reshape(-1, N), 1).view(*log_q.shape[:-1], 1)
        sample = every.gather(-2, z.unsqueeze(-1).expand(*z.shape, d))   # (B, [T,] 1, d)
        log_q_z = log_q.gather(-1, z).squeeze(-1)                      # (B, [T])
        return StepOutput(mean=soft, attn=a, samples=sample, losses=losses,
                          aux={"log_q_z": log_q_z, "soft": soft, "z": z.squeeze(-1)})

    # -- after the output layer -------------------------------------------------------------------
    def sequence_losses(self, out, log_prob_fn, target, prepared):
        """sample mode, training: ``reinforce`` and ``baseline_nll`` (B, T) (module docstring)."""
        if not self.training or self.mode != "sample" or "log_q_z" not in out.aux:
            return {}
        with torch.no_grad():
            lp_z = log_prob_fn(out.samples).float()[..., 0]           # (B, T) log p(y | h_z)
        lp_b = log_prob_fn(out.aux["soft"].unsqueeze(2)).float()[..., 0]   # (B, T) baseline
        reward = lp_z - lp_b.detach()
        return {"reinforce": -reward * out.aux["log_q_z"].float(), "baseline_nll": -lp_b}

    def loss_weight(self, name):
        return self.beta if name == "kl" else 1.0
