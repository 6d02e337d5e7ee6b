"""The two ways a :class:`~fairseq_acvi.modules.seq2seq.context_decoder.ContextLSTMDecoder` goes
through the target steps (docs/method.md §2-3, §3.7): the step loop, one step after the other
(incremental decoding, and every teacher-forced pass of a recurrent configuration), each step one
call of :meth:`DecoderPasses._recurrent_step` (compiled in teacher-forced passes under
``--compile-decoder-step``, §3.8: :mod:`fairseq_acvi.modules.seq2seq.compiled_step`), and the
parallel path, every step of a teacher-forced pass at once (no input feeding, nothing else
recurrent; seed 003's attention over the decoder's own states is causal attention there).

:class:`DecoderPasses` is a mixin of the decoder: it reads the parts the decoder builds (``layers``
(nn.LSTMCell each), ``scorer``, ``context``, ``W_c``, ``self_attn``, ``past_attn``) and its settings
(``input_feeding``, ``use_coverage``, ``num_layers``, ``dropout_out``, ``context_ablation``).
Both passes take the embedded inputs x (B, T, E), the incremental state's ``cache``, the prepared
memory and the context inference's prepared tensors, and return the decoder outputs u (B, T, ·),
the attentional vectors (B, T, out_dim), the stacked steps (fields (B, T, ...)) before the
context inference's ``finish``, the new state, and seed 003's decoder-past weights or None.
"""
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq_acvi.modules.context import stack_steps
from fairseq_acvi.modules.context.scorers import Memory
from fairseq_acvi.modules.seq2seq import compiled_step

#: the incremental state's entries that one step reads and replaces, where the configuration
#: keeps them (besides the LSTM state and the context inference's ``state_*``)
CARRIED = ("feed", "coverage", "sa_keys", "sa_values", "past_keys", "past_values")


class DecoderPasses:
    """The step loop (:meth:`_step_by_step`) and the parallel path (:meth:`_all_steps`)."""

    #: False forces the step loop where the parallel path would run (benchmarks and tests compare
    #: the two on one model)
    parallel_teacher_forcing = True
    #: ``--compile-decoder-step``: how a teacher-forced pass of the step loop runs its step
    #: (compiled_step.py; ``none``, the eager step, by default)
    compile_step = "none"

    @property
    def runs_in_parallel(self) -> bool:
        """Whether a teacher-forced pass (no incremental state) computes every step at once
        (:meth:`_all_steps`): no input feeding, a context inference that allows it (not
        stateful: no planning, no constrained normaliser) and no coverage (their recurrences run
        step by step). Seed 003's decoder options run there too: their attention over the
        decoder's own states is causal."""
        return (self.parallel_teacher_forcing and not self.input_feeding
                and self.context.runs_in_parallel and not self.use_coverage)

    def _layer_params(self, i: int):
        cell = self.layers[i]
        return [cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh]

    def _all_steps(self, x: Tensor, cache: Dict[str, Tensor], mem: Memory,
                   prepared: Dict[str, Tensor]):
        """Every step of a teacher-forced pass at once (docs/method.md §3.7; only when
        :attr:`runs_in_parallel`): each LSTM layer over all T steps in one fused call (cuDNN on
        a GPU, ATen's CPU kernel), the scores, the context inference and W_c for all steps in
        batched calls; seed 003's self-attention (iii) and attention over the decoder's past (ii)
        as causal attention over all steps. x (B, T, E) -> (u (B, T, pred_dim), the attentional
        vectors (B, T, out_dim), the stacked steps (fields (B, T, ...)) before ``finish``, the
        final state, the decoder-past weights (B, T, t0 + T − 1) or None). The values of
        :meth:`_step_by_step` up to float rounding; the dropout between layers is an ``F.dropout``
        of each layer's outputs, as there (so MC dropout samples it)."""
        extra_in = self.context.decoder_input(prepared)
        inp = x
        if extra_in is not None:
            inp = torch.cat([x, extra_in.to(x.dtype).unsqueeze(1).expand(-1, x.size(1), -1)], dim=2)
        hs, cs = [], []
        for i in range(self.num_layers):
            if i > 0:
                inp = F.dropout(inp, p=self.dropout_out, training=self.training)
            inp, h_i, c_i = torch.lstm(inp, (cache["h"][i:i + 1], cache["c"][i:i + 1]),
                                       self._layer_params(i), True, 1, 0.0, self.training,
                                       False, True)
            hs.append(h_i)
            cs.append(c_i)
        s = inp                                                        # (B, T, H)
        new_cache = dict(cache, h=torch.cat(hs), c=torch.cat(cs))
        if self.self_attn is not None:             # (iii): q_t replaces s_t below
            s, new_cache["sa_keys"], new_cache["sa_values"] = self.self_attn.steps(
                s, cache["sa_keys"], cache["sa_values"])
        u, past_attn = s, None
        if self.past_attn is not None:             # (ii): d_t over q_1..q_{t-1}, u_t = [q_t ; d_t]
            d, past_attn, new_cache["past_keys"], new_cache["past_values"] = self.past_attn.steps(
                s, cache["past_keys"], cache["past_values"])
            u = torch.cat([s, d.to(s.dtype)], dim=2)
        out = self.context.steps(self.scorer(s, mem), s, mem, prepared)
        if self.context_ablation == "zero":
            out = out.zeroed()
        feeds = torch.tanh(self.W_c(torch.cat([u, out.mean.to(s.dtype)], dim=2)))
        return u, feeds, out, new_cache, past_attn

    def _step_by_step(self, x: Tensor, cache: Dict[str, Tensor], mem: Memory,
                      prepared: Dict[str, Tensor], t0: int, incremental: bool):
        """The decoder's recurrence one step after the other (module docstring), steps t0 ..
        t0 + T − 1, each by :meth:`_recurrent_step`, compiled in a teacher-forced pass
        (``incremental`` False) when ``--compile-decoder-step`` asks
        (:mod:`fairseq_acvi.modules.seq2seq.compiled_step`). x (B, T, E) -> (u (B, T,
        pred_dim), the attentional vectors (B, T, out_dim), the stacked steps before ``finish``,
        the new incremental state, the coverage loss (B, T) or None, seed 003's decoder-past
        weights (B, T, t0 + T − 1) or None)."""
        T = x.size(1)
        carry = {"h": tuple(cache["h"].unbind(0)), "c": tuple(cache["c"].unbind(0)),
                 "state": {k[len("state_"):]: v for k, v in cache.items() if k.startswith("state_")}}
        carry.update({k: cache[k] for k in CARRIED if k in cache})
        extra_in = self.context.decoder_input(prepared)
        step = compiled_step.step_function(self, "none" if incremental else self.compile_step)
        s_all, feeds, steps, cov_losses, past_attns = [], [], [], [], []
        # one unbind, not T slices: the backward of every slice x[:, t] would zero-fill a gradient
        # of the whole (B, T, E) input; unbind's stacks the T step gradients once
        for t, x_t in enumerate(x.unbind(1)):
            u_t, feed, out, cov_loss, b_t, carry = step(x_t, carry, mem, prepared, extra_in, t0 + t)
            s_all.append(u_t)
            feeds.append(feed)
            steps.append(out)
            if cov_loss is not None:
                cov_losses.append(cov_loss)
            if b_t is not None:
                past_attns.append(b_t)

        new_cache = dict(cache, h=torch.stack(carry["h"]), c=torch.stack(carry["c"]))
        new_cache.update({k: carry[k] for k in CARRIED if k in carry})
        new_cache.update({"state_" + k: v for k, v in carry["state"].items()})
        past_attn = None
        if self.past_attn is not None:
            width = t0 + T - 1
            past_attn = torch.stack([F.pad(b, (0, width - b.size(1))) for b in past_attns],
                                    dim=1)                              # (B, T, width)
        return (torch.stack(s_all, dim=1), torch.stack(feeds, dim=1), stack_steps(steps),
                new_cache, torch.stack(cov_losses, 1) if cov_losses else None, past_attn)

    def _recurrent_step(self, x_t: Tensor, carry: Dict, mem: Memory, prepared: Dict[str, Tensor],
                        extra_in, t: int):
        """One step of the recurrence (module docstring of the decoder). x_t (B, E); ``carry``:
        ``h``, ``c`` (a (B, H) tensor a layer each), ``state`` (the context inference's recurrent
        state, {} unless stateful) and those of ``feed`` (B, out_dim), ``coverage`` (B, N),
        ``sa_keys`` / ``sa_values`` (B, heads, t, d_h), ``past_keys`` / ``past_values`` (B, t, ·)
        that the configuration keeps; ``extra_in`` (B, ·) or None: the context inference's
        decoder input. -> (u_t (B, pred_dim), f_t (B, out_dim), the context inference's
        :class:`StepOutput`, the coverage loss (B,) or None, the decoder-past weights (B, t) or
        None, the carry after the step). Tensors, dicts and the step index in and out only, so
        that ``torch.compile`` captures it whole (compiled_step.py)."""
        h, c = list(carry["h"]), list(carry["c"])
        new = dict(carry)
        parts = [x_t]
        if self.input_feeding:
            parts.append(F.dropout(carry["feed"], p=self.dropout_out, training=self.training))
        if extra_in is not None:
            parts.append(extra_in.to(x_t.dtype))
        inp = torch.cat(parts, dim=1)
        for i, cell in enumerate(self.layers):
            h[i], c[i] = cell(inp, (h[i], c[i]))
            inp = F.dropout(h[i], p=self.dropout_out, training=self.training)
        new["h"], new["c"] = tuple(h), tuple(c)
        s_t = h[-1]
        if self.self_attn is not None:             # (iii): q_t, which replaces s_t below
            s_t, new["sa_keys"], new["sa_values"] = self.self_attn.step(
                s_t, carry["sa_keys"], carry["sa_values"])
        u_t, b_t = s_t, None
        if self.past_attn is not None:             # (ii): d_t over q_1..q_{t-1}, then add q_t
            d_t, b_t = self.past_attn(s_t, carry["past_keys"], carry["past_values"])
            new["past_keys"], new["past_values"] = self.past_attn.append(
                s_t, carry["past_keys"], carry["past_values"])
            u_t = torch.cat([s_t, d_t.to(s_t.dtype)], dim=1)
        coverage = carry.get("coverage")
        scores = self.scorer(s_t, mem, coverage)
        if self.context.stateful:
            out = self.context.step(scores, s_t, mem, prepared, t, state=carry["state"])
            new["state"] = out.state
        else:
            out = self.context.step(scores, s_t, mem, prepared, t)
        if self.context_ablation == "zero":
            out = out.zeroed()
        cov_loss = None
        if coverage is not None:
            cov_loss = torch.minimum(out.attn, coverage.float()).sum(-1)
            new["coverage"] = coverage + out.attn.to(coverage.dtype)
        feed = torch.tanh(self.W_c(torch.cat([u_t, out.mean.to(s_t.dtype)], dim=1)))
        if self.input_feeding:
            new["feed"] = feed
        return u_t, feed, out, cov_loss, b_t, new
