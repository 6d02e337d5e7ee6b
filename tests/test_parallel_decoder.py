"""The parallel teacher-forced path (``--input-feeding 0``, docs/method.md §3.7): every step at once
equals the step loop and incremental decoding, in value and gradient; what falls back to the loop.
(A model trained through it learns reversal: tests/test_learnability.py.)"""
import argparse

import pytest
import torch

from test_seq2seq_model import _batch, build_model, incremental_and_full
from test_translation_cli import check_finite_losses, generate, logged, reversal_bin, train

from fairseq_acvi.models.seq2seq_base import seq2seq_defaults
from fairseq_acvi.modules.context import scorers
from fairseq_acvi.modules.context.scorers import SCORERS

PARALLEL = ["none", "soft", "acvi", "structured", "variational", "ved"]
#: (variant, options) pairs covering what the parallel path computes differently from the loop
CASES = ([(v, {}) for v in PARALLEL]
         + [("soft", {"attention_type": s}) for s in SCORERS if s != "multiplicative"]
         + [("soft", {"attention_normalizer": n}) for n in ("sparsemax", "entmax15")]
         + [("acvi", {"acvi_sampler": "gumbel"}), ("acvi", {"acvi_mean": "mlp"}),
            ("variational", {"variational_decode": "exact"}), ("ved", {"ved_word_keep": 0.5})]
         # seed 003's configurations (ii), (iii) and both, with each scorer; and under ACVI
         + [("soft", {"attention_type": s, **o}) for s in SCORERS
            for o in ({"attend_decoder_past": True}, {"self_attention_heads": 2},
                      {"attend_decoder_past": True, "self_attention_heads": 2})]
         + [("acvi", {"attend_decoder_past": True, "self_attention_heads": 2})])


def _ids(cases):
    return [v + "".join(f"-{k}={x}" if isinstance(x, bool) or k == "self_attention_heads"
                        else f"-{x}" for k, x in o.items()) for v, o in cases]


def _forward(model, d, src, lengths, prev, parallel: bool, seed: int = 1):
    """One teacher-forced forward and backward with the parallel path on or off: (log-probs,
    extra, the flattened parameter gradient of NLL + Σ weighted losses)."""
    model.decoder.parallel_teacher_forcing = parallel
    torch.manual_seed(seed)          # the same noise for both (ACVI's samples, VED's z, word dropout)
    enc = model.encoder(src, lengths)
    tgt = model.decoder._targets(prev)                     # y_1..y_T, </s> last, right-padded
    lprobs, extra = model.decoder(prev, enc, **model.decoder.training_inputs(tgt))
    loss = -lprobs.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)[tgt.ne(d.pad())].sum()
    for value, weight in extra["losses"].values():
        loss = loss + (1.0 if weight is None else weight) * value
    model.zero_grad()
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return lprobs.detach(), extra, grad


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("variant,options", CASES, ids=_ids(CASES))
def test_parallel_forward_equals_the_step_loop(variant, options, training):
    torch.manual_seed(0)
    model, d = build_model(variant, input_feeding=0, mc_samples=3, **options)
    model.double().train(training)
    assert model.decoder.runs_in_parallel
    src, lengths, prev = _batch(d)
    par, par_extra, par_grad = _forward(model, d, src, lengths, prev, parallel=True)
    loop, loop_extra, loop_grad = _forward(model, d, src, lengths, prev, parallel=False)
    nonpad = prev.ne(d.pad())
    assert par.dtype == torch.float64 and torch.isfinite(par[nonpad]).all()
    torch.testing.assert_close(par[nonpad], loop[nonpad], atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(par_grad, loop_grad, atol=1e-10, rtol=1e-10)
    assert set(par_extra["losses"]) == set(loop_extra["losses"])
    for name, (value, weight) in par_extra["losses"].items():
        torch.testing.assert_close(value, loop_extra["losses"][name][0], atol=1e-10, rtol=1e-10)
        assert weight == loop_extra["losses"][name][1]
    if variant != "none":
        torch.testing.assert_close(par_extra["attn"][0], loop_extra["attn"][0],
                                   atol=1e-10, rtol=1e-10)
    assert ("decoder_past_attn" in par_extra) == bool(options.get("attend_decoder_past"))
    if "decoder_past_attn" in par_extra:
        torch.testing.assert_close(par_extra["decoder_past_attn"], loop_extra["decoder_past_attn"],
                                   atol=1e-10, rtol=1e-10)
    # the model is not a trivial one: its prediction depends on the source
    if variant != "none":
        other = src.flip(0)
        moved, _, _ = _forward(model, d, other, lengths.flip(0), prev, parallel=True)
        assert (moved[nonpad] - par[nonpad]).abs().max() > 1e-4


@pytest.mark.parametrize("limit", [1, 400])
def test_the_additive_scorer_scores_long_passes_a_few_steps_at_a_time(monkeypatch, limit):
    """Chunks of one step (limit 1) or two (400 elements over 3 × 6 × 10 per step) give the
    scores of all steps at once."""
    torch.manual_seed(0)
    model, d = build_model("soft", input_feeding=0, attention_type="additive")
    model.double().eval()
    src, lengths, prev = _batch(d)
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        mem = model.decoder.scorer.prepare(enc["encoder_out"][0], enc["encoder_padding_mask"][0])
        query = torch.randn(3, 5, 20, dtype=torch.float64)
        whole = model.decoder.scorer(query, mem)
        monkeypatch.setattr(scorers, "_STEP_CHUNK_ELEMENTS", limit)
        chunked = model.decoder.scorer(query, mem)
        steps = torch.stack([model.decoder.scorer(query[:, t], mem) for t in range(5)], dim=1)
    assert whole.shape == (3, 5, 6)
    torch.testing.assert_close(chunked, whole, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(steps, whole, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("variant,options", [(v, {}) for v in PARALLEL] + [
    ("soft", {"attend_decoder_past": True, "self_attention_heads": 2, "attention_type": s})
    for s in SCORERS], ids=_ids([(v, {}) for v in PARALLEL] + [
        ("soft", {"attend_decoder_past": True, "self_attention_heads": 2, "attention_type": s})
        for s in SCORERS]))
def test_incremental_decoding_equals_the_parallel_forward(variant, options):
    torch.manual_seed(0)
    model, d = build_model(variant, input_feeding=0, **options)
    assert model.decoder.runs_in_parallel
    model.double().eval()
    src, lengths, prev = _batch(d)
    inc, full, _, state = incremental_and_full(model, src, lengths, prev)
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-10, rtol=1e-10)
    cache = model.decoder.get_incremental_state(state, "cache")
    assert "feed" not in cache                     # nothing is fed back without input feeding


@pytest.mark.parametrize("variant,options,why", [
    ("soft", {"input_feeding": 1}, "input feeding"),
    ("pag", {"input_feeding": 0}, "planning"),
    ("soft", {"input_feeding": 0, "attention_normalizer": "csoftmax"}, "constrained"),
    ("soft", {"input_feeding": 1, "attend_decoder_past": True}, "decoder past, fed"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_recurrent_configurations_keep_the_step_loop(variant, options, why):
    torch.manual_seed(0)
    model, d = build_model(variant, **options)
    assert not model.decoder.runs_in_parallel, why
    model.double().eval()
    src, lengths, prev = _batch(d)
    inc, full, _, _ = incremental_and_full(model, src, lengths, prev)
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-10, rtol=1e-10)
    if why == "planning" or why == "constrained":
        with pytest.raises(ValueError, match="step by step"):
            model.decoder.context.steps(None, None, None, {})


def test_without_input_feeding_the_lstm_reads_only_the_embeddings():
    fed, _ = build_model("ved", input_feeding=1)
    plain, _ = build_model("ved", input_feeding=0)
    latent = plain.decoder.context.decoder_input_dim
    assert plain.decoder.layers[0].input_size == 16 + latent
    assert fed.decoder.layers[0].input_size == 16 + latent + fed.decoder.out_dim
    ns = argparse.Namespace(input_feeding=2, context_inference="soft")
    with pytest.raises(ValueError, match="--input-feeding must be 0 or 1"):
        seq2seq_defaults(ns)


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return reversal_bin(tmp_path_factory.mktemp("raw"))


def test_input_feeding_zero_through_the_clis_in_fp16(data_bin, tmp_path):
    """fairseq-train --input-feeding 0 --memory-efficient-fp16 (ACVI, the parallel path) ->
    checkpoint -> fairseq-generate; the option is kept in the checkpoint."""
    res = train(data_bin, tmp_path, "--context-inference", "acvi", "--input-feeding", "0",
                "--memory-efficient-fp16", "--fp16-init-scale", "8", updates=8)
    check_finite_losses(res, ("loss", "nll_loss", "kl"))
    losses = logged(res.stdout + res.stderr, "loss")
    assert losses[-1] < losses[0], losses
    state = torch.load(tmp_path / "checkpoint_last.pt", weights_only=True)
    assert state["cfg"]["model"].input_feeding == 0
    generate(data_bin, tmp_path / "checkpoint_last.pt", "--fp16", "--model-overrides",
             "{'mc_samples': 3}")


def test_the_parallel_path_dispatches_the_same_operators_whatever_the_length():
    """Every step at once: one training step's forward and backward dispatch as many operators
    (views aside) at T = 5 as at T = 10, seed 003's options included; the step loop's grow with T."""
    import collections
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view:
                self.n[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    def count(model, d, T):
        src, lengths, prev = _batch(d, T=T)
        with Count() as c:
            _forward(model, d, src, lengths, prev, parallel=model.decoder.parallel_teacher_forcing)
        return c.n

    torch.manual_seed(0)
    model, d = build_model("acvi", input_feeding=0, mc_samples=3, attend_decoder_past=True,
                           self_attention_heads=2)
    model.train()
    assert count(model, d, 5) == count(model, d, 10)
    model.decoder.parallel_teacher_forcing = False
    loop5, loop10 = count(model, d, 5), count(model, d, 10)
    assert sum(loop10.values()) - sum(loop5.values()) > 5 * 50     # dozens of operators per step
