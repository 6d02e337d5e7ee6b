"""``--key-value-inner``: the scorer the key-value scorer applies to its keys (docs/method.md §1;
seed 003: "f_att can be any of the previously mentioned attention functions"). Each inner scorer
gives its closed-form scores on the keys k_i of [k_i; v_i] = T h_i and contexts from the values;
the model decodes incrementally as it does teacher-forced, with and without the decoder's past;
the default is the multiplicative scorer of the models trained before the option (same parameter
names); a bad combination is refused naming the option."""
import math

import pytest
import torch

from fairseq_acvi.modules.context.scorers import INNER_SCORERS, KeyValueScorer, build_scorer
from test_decoder_past import build_model
from test_seq2seq_model import _batch, incremental_and_full

B, N, Q, K, A = 2, 5, 6, 8, 4


def _inputs():
    torch.manual_seed(0)
    return torch.randn(B, N, K, dtype=torch.float64), torch.randn(B, Q, dtype=torch.float64)


def _by_hand(scorer, h, s):
    """The scores e (B, N) of ``scorer`` (a KeyValueScorer) written out from its weights."""
    k = h @ scorer.T.weight[:K].t()                                   # (B, N, K)
    inner = scorer.inner
    if isinstance(inner, type(build_scorer("multiplicative", Q, K, A))):
        return torch.einsum("bnk,qk,bq->bn", k, inner.W.weight, s)
    if isinstance(inner, type(build_scorer("scaled-dot", Q, K, A))):
        return torch.einsum("bna,ba->bn", k @ inner.P_h.weight.t(), s @ inner.P_s.weight.t()) / math.sqrt(A)
    pre = k @ inner.W_h.weight.t() + (s @ inner.W_s.weight.t() + inner.W_s.bias).unsqueeze(1)
    return torch.tanh(pre) @ inner.v.weight[0]


@pytest.mark.parametrize("inner", INNER_SCORERS)
def test_each_inner_scorer_scores_the_keys_and_the_context_reads_the_values(inner):
    h, s = _inputs()
    scorer = build_scorer("key-value", Q, K, A, inner=inner).double()
    assert isinstance(scorer, KeyValueScorer)
    mem = scorer.prepare(h, torch.zeros(B, N, dtype=torch.bool))
    torch.testing.assert_close(scorer(s, mem), _by_hand(scorer, h, s), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(mem.values, h @ scorer.T.weight[K:].t(), rtol=1e-12, atol=1e-12)
    # every step at once = one step at a time
    steps = torch.randn(B, 3, Q, dtype=torch.float64)
    torch.testing.assert_close(scorer(steps, mem)[:, 1], scorer(steps[:, 1], mem),
                               rtol=1e-12, atol=1e-12)


def test_the_default_is_the_multiplicative_scorer_of_earlier_models():
    default = build_model("soft", attention_type="key-value")[0]
    named = build_model("soft", attention_type="key-value", key_value_inner="multiplicative")[0]
    keys = [k for k in default.state_dict() if k.startswith("decoder.scorer.")]
    assert keys == ["decoder.scorer.T.weight", "decoder.scorer.inner.W.weight"]
    assert list(named.state_dict()) == list(default.state_dict())
    scaled = build_model("soft", attention_type="key-value", key_value_inner="scaled-dot")[0]
    assert "decoder.scorer.inner.P_s.weight" in scaled.state_dict()


@pytest.mark.parametrize("past", [False, True])
@pytest.mark.parametrize("inner", ["additive", "scaled-dot"])
def test_incremental_decoding_equals_teacher_forcing(inner, past):
    torch.manual_seed(0)
    model, d = build_model("soft", attention_type="key-value", key_value_inner=inner,
                           attend_decoder_past=past)
    model.eval()
    if past:          # the decoder's past is scored by the same family, inner scorer included
        assert type(model.decoder.past_attn.scorer.inner).__name__ == type(model.decoder.scorer.inner).__name__
    src, lengths, prev = _batch(d)
    inc, full, _, _ = incremental_and_full(model, src, lengths, prev)
    nonpad = prev.ne(d.pad())
    torch.testing.assert_close(inc[nonpad], full[nonpad], atol=1e-5, rtol=1e-5)


def test_bad_combinations_are_refused_naming_the_option():
    with pytest.raises(ValueError, match="--key-value-inner scaled-dot applies to --attention-type "
                                         "key-value only, not additive"):
        build_model("soft", attention_type="additive", key_value_inner="scaled-dot")
    with pytest.raises(ValueError, match="--key-value-inner: unknown scorer 'key-value'"):
        build_scorer("key-value", Q, K, A, inner="key-value")


def test_the_option_through_the_clis(tmp_path):
    """fairseq-train with --attention-type key-value --key-value-inner scaled-dot (half parameters
    on a CPU) → checkpoint (the option recorded, the inner scorer's parameters saved) →
    fairseq-generate writes every hypothesis."""
    from test_translation_cli import check_finite_losses, generate, reversal_bin, train
    (tmp_path / "raw").mkdir()
    data_bin = reversal_bin(tmp_path / "raw")
    res = train(data_bin, tmp_path, "--context-inference", "soft", "--attention-type", "key-value",
                "--key-value-inner", "scaled-dot", "--attend-decoder-past",
                "--memory-efficient-fp16", "--fp16-init-scale", "8", "--cpu", updates=3)
    check_finite_losses(res, ("loss", "nll_loss"))
    state = torch.load(tmp_path / "checkpoint_last.pt", weights_only=True)
    assert state["cfg"]["model"].key_value_inner == "scaled-dot"
    assert {"decoder.scorer.inner.P_s.weight", "decoder.past_attn.scorer.inner.P_h.weight"} <= set(state["model"])
    generate(data_bin, tmp_path / "checkpoint_last.pt", "--cpu")
