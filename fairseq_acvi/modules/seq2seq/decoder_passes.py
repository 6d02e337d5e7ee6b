"""The two ways a :class:`~fairseq_acvi.modules.seq2seq.context_decoder.ContextLSTMDecoder` goes
through the target steps (docs/method.md §2-3, §3.7): the step loop, one step after the other
(incremental decoding, and every teacher-forced pass of a recurrent configuration), and the
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


class DecoderPasses:
    """The step loop (:meth:`_step_by_step`) and the parallel path (:meth:`_all_steps`)."""

    #: False forces the step loop where the parallel path would run (benchmarks and tests compare
    #: the two on one model)
    parallel_teacher_forcing = True

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
                      prepared: Dict[str, Tensor], t0: int):
        """The decoder's recurrence one step after the other (module docstring), steps t0 ..
        t0 + T − 1. x (B, T, E) -> (u (B, T, pred_dim), the attentional vectors (B, T, out_dim),
        the stacked steps before ``finish``, the new incremental state, the coverage loss (B, T)
        or None, seed 003's decoder-past weights (B, T, t0 + T − 1) or None)."""
        T = x.size(1)
        h, c = list(cache["h"].unbind(0)), list(cache["c"].unbind(0))
        feed, coverage = cache.get("feed"), cache.get("coverage")
        ctx_state = {k[len("state_"):]: v for k, v in cache.items() if k.startswith("state_")}
        stateful = self.context.stateful
        extra_in = self.context.decoder_input(prepared)

        s_all, feeds, steps, cov_losses = [], [], [], []
        sa, past = self.self_attn, self.past_attn
        if sa is not None:
            sa_keys, sa_values = cache["sa_keys"], cache["sa_values"]
        if past is not None:
            past_keys, past_values, past_attns = cache["past_keys"], cache["past_values"], []
        # one unbind, not T slices: the backward of every slice x[:, t] would zero-fill a gradient
        # of the whole (B, T, E) input; unbind's stacks the T step gradients once
        x_steps = x.unbind(1)
        for t in range(T):
            parts = [x_steps[t]]
            if self.input_feeding:
                parts.append(F.dropout(feed, p=self.dropout_out, training=self.training))
            if extra_in is not None:
                parts.append(extra_in.to(x.dtype))
            inp = torch.cat(parts, dim=1)
            for i, cell in enumerate(self.layers):
                h[i], c[i] = cell(inp, (h[i], c[i]))
                inp = F.dropout(h[i], p=self.dropout_out, training=self.training)
            s_t = h[-1]
            if sa is not None:                     # (iii): q_t, which replaces s_t below
                s_t, sa_keys, sa_values = sa.step(s_t, sa_keys, sa_values)
            u_t = s_t
            if past is not None:                   # (ii): d_t over q_1..q_{t-1}, then add q_t
                d_t, b_t = past(s_t, past_keys, past_values)
                past_keys, past_values = past.append(s_t, past_keys, past_values)
                past_attns.append(b_t)
                u_t = torch.cat([s_t, d_t.to(s_t.dtype)], dim=1)
            s_all.append(u_t)
            scores = self.scorer(s_t, mem, coverage)
            if stateful:
                out = self.context.step(scores, s_t, mem, prepared, t0 + t, state=ctx_state)
                ctx_state = out.state
            else:
                out = self.context.step(scores, s_t, mem, prepared, t0 + t)
            if self.context_ablation == "zero":
                out = out.zeroed()
            if coverage is not None:
                cov_losses.append(torch.minimum(out.attn, coverage.float()).sum(-1))
                coverage = coverage + out.attn.to(coverage.dtype)
            feed = torch.tanh(self.W_c(torch.cat([u_t, out.mean.to(s_t.dtype)], dim=1)))
            feeds.append(feed)
            steps.append(out)

        new_cache = dict(cache, h=torch.stack(h), c=torch.stack(c))
        if self.input_feeding:
            new_cache["feed"] = feed
        if sa is not None:
            new_cache.update(sa_keys=sa_keys, sa_values=sa_values)
        if past is not None:
            new_cache.update(past_keys=past_keys, past_values=past_values)
        if coverage is not None:
            new_cache["coverage"] = coverage
        new_cache.update({"state_" + k: v for k, v in ctx_state.items()})
        past_attn = None
        if past is not None:
            width = t0 + T - 1
            past_attn = torch.stack([F.pad(b, (0, width - b.size(1))) for b in past_attns],
                                    dim=1)                              # (B, T, width)
        return (torch.stack(s_all, dim=1), torch.stack(feeds, dim=1), stack_steps(steps),
                new_cache, torch.stack(cov_losses, 1) if cov_losses else None, past_attn)
