"""The step loop's compiled step (``--compile-decoder-step``, modules/seq2seq/compiled_step.py): the
step is captured whole (no graph break) for every configuration that runs the step loop, and the
compiled step gives the eager step's values and gradients; incremental decoding stays eager."""
import argparse

import pytest
import torch
from fairseq import checkpoint_utils
import torch._inductor.config as inductor_config

import test_pointer_generator as pg
from test_seq2seq_model import _batch, build_model, incremental_and_full
from test_translation_cli import data_bin, generate, logged, train  # noqa: F401 (a fixture)

from fairseq_acvi.models.seq2seq_base import seq2seq_defaults
from fairseq_acvi.modules.seq2seq import compiled_step

#: every configuration that teacher-forces through the step loop (input feeding, planning,
#: coverage, constrained normalisers), each context inference and seed 003's options
CASES = [
    ("soft", {}), ("acvi", {"mc_samples": 3}), ("structured", {}), ("variational", {}),
    ("ved", {}), ("pag", {}), ("rpag", {}),
    ("soft", {"attention_normalizer": "csparsemax"}), ("soft", {"attention_normalizer": "csoftmax"}),
    ("soft", {"attention_type": "additive", "attend_decoder_past": True, "self_attention_heads": 2}),
    ("acvi", {"mc_samples": 3, "attend_decoder_past": True, "self_attention_heads": 2}),
    ("soft", {"input_feeding": 0, "attention_normalizer": "csparsemax"}),
]
IDS = [v + "".join(f"-{k}={x}" for k, x in o.items() if k != "mc_samples") for v, o in CASES]


def _train_pass(model, src, lengths, prev, pad, mode, seed=3):
    """One teacher-forced forward and backward in ``mode``: (log-probs, {loss name: value},
    attention, the flattened parameter gradient of NLL + Σ weighted losses)."""
    model.decoder.compile_step = mode
    torch.manual_seed(seed)
    enc = model.encoder(src, lengths)
    tgt = model.decoder._targets(prev)
    lprobs, extra = model.decoder(prev, enc, **model.decoder.training_inputs(tgt))
    if lprobs is None:                  # the pointer-generator scores the gold tokens itself
        lprobs = extra["target_lprobs"].unsqueeze(-1)
        gold = lprobs.squeeze(-1)
    else:
        gold = lprobs.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    loss = -gold[tgt.ne(pad)].sum()
    for value, weight in extra["losses"].values():
        loss = loss + (1.0 if weight is None else weight) * value
    model.zero_grad()
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    losses = {k: v.detach() for k, (v, _) in extra["losses"].items()}
    return lprobs.detach(), losses, extra["attn"][0], grad


def build_variant(variant: str):
    """The test model of ``variant`` (``soft``, ``acvi``, ``pag``; ``<v>-parallel``: without input
    feeding, so that a teacher-forced pass runs the parallel path), dropout 0.3, ACVI with 3
    samples: (model, dictionary)."""
    name, _, parallel = variant.partition("-")
    model, d = build_model(name, dropout=0.3, mc_samples=3 if name == "acvi" else 0,
                           input_feeding=0 if parallel else 1)
    assert model.decoder.runs_in_parallel == bool(parallel)
    return model, d


def _check_same(model, d, src, lengths, prev, mode, atol):
    """The compiled pass of ``model``'s configuration (its step loop's step, or its parallel pass
    where it runs one) against the eager one: values, losses, attention and gradients."""
    method = "_all_steps" if model.decoder.runs_in_parallel else "_recurrent_step"
    eager = _train_pass(model, src, lengths, prev, d.pad(), "none")
    calls, real = [], compiled_step.compiled

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    compiled_step.compiled = spy
    try:
        comp = _train_pass(model, src, lengths, prev, d.pad(), mode)
    finally:
        compiled_step.compiled = real
    assert [c[1:] for c in calls] == [(mode, method)]           # the pass ran the compiled method
    nonpad = prev.ne(d.pad())
    assert torch.isfinite(comp[0][nonpad]).all()
    torch.testing.assert_close(comp[0][nonpad], eager[0][nonpad], atol=atol, rtol=atol)
    assert comp[1].keys() == eager[1].keys()
    for name in eager[1]:
        torch.testing.assert_close(comp[1][name], eager[1][name], atol=atol, rtol=atol)
    if eager[2] is not None:
        torch.testing.assert_close(comp[2], eager[2], atol=atol, rtol=atol)
    torch.testing.assert_close(comp[3], eager[3], atol=atol, rtol=atol)
    # the gradient is not a trivial one
    assert comp[3].abs().max() > 1e-3


@pytest.fixture
def captured_whole(monkeypatch):
    """The compiled path with TorchDynamo's capture and AOT autograd but PyTorch's own kernels
    (``aot_eager``, seconds to compile), ``fullgraph``: any graph break in the step is an error.
    (AOT autograd draws dropout's mask by another kernel than eager: these tests use dropout 0;
    the sampling of PAG's Gumbel-softmax is compared; the slow test below compares dropout.)"""
    monkeypatch.setattr(compiled_step, "_COMPILE_ARGS",
                        {"inductor": {"backend": "aot_eager", "fullgraph": True}})
    monkeypatch.setattr(compiled_step, "_COMPILED", {})
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("variant,options", CASES, ids=IDS)
def test_the_step_is_captured_whole_and_computes_the_eager_values(captured_whole, variant,
                                                                   options):
    torch.manual_seed(0)
    model, d = build_model(variant, **{"dropout": 0.0, **options})
    model.double().train()
    src, lengths, prev = _batch(d)
    _check_same(model, d, src, lengths, prev, "inductor", atol=1e-10)


#: configurations that run the parallel path (no input feeding): the mode compiles the whole pass
PARALLEL_CASES = [
    ("soft", {}), ("acvi", {"mc_samples": 3}), ("structured", {}), ("variational", {}), ("ved", {}),
    ("soft", {"attention_type": "additive", "attend_decoder_past": True, "self_attention_heads": 2}),
]
PARALLEL_IDS = [v + "".join(f"-{k}={x}" for k, x in o.items() if k != "mc_samples")
                for v, o in PARALLEL_CASES]


@pytest.mark.parametrize("variant,options", PARALLEL_CASES, ids=PARALLEL_IDS)
def test_the_parallel_pass_is_captured_whole_and_computes_the_eager_values(captured_whole,
                                                                           variant, options):
    torch.manual_seed(0)
    model, d = build_model(variant, **{"dropout": 0.0, "input_feeding": 0, **options})
    model.double().train()
    assert model.decoder.runs_in_parallel
    src, lengths, prev = _batch(d)
    _check_same(model, d, src, lengths, prev, "inductor", atol=1e-10)


@pytest.mark.parametrize("variant", ["soft", "acvi"])
def test_the_pointer_generators_coverage_step_is_captured_whole(captured_whole, variant):
    torch.manual_seed(0)
    model, d = pg.build_model(variant, coverage=True, dropout=0.0,
                              mc_samples=3 if variant == "acvi" else 0)
    model.double().train()
    src, lengths, prev = pg._batch(d)
    _check_same(model, d, src, lengths, prev, "inductor", atol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["inductor", "reduce-overhead"])
@pytest.mark.parametrize("variant", ["soft", "acvi", "pag", "acvi-parallel"])
def test_the_compiled_kernels_compute_the_eager_values(monkeypatch, mode, variant):
    """TorchInductor's generated kernels (C++ here; Triton on a GPU: tests/test_cuda.py), with
    the eager random numbers (``fallback_random``); PAG's plan is float32 even in a float64 model
    (pag.py), so its tolerance is float32's. ``acvi-parallel``: without input feeding, the
    parallel path's whole pass compiled."""
    monkeypatch.setattr(compiled_step, "_COMPILED", {})
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, d = build_variant(variant)
    model.double().train()
    src, lengths, prev = _batch(d)
    with inductor_config.patch(fallback_random=True):
        _check_same(model, d, src, lengths, prev, mode, atol=1e-6 if variant == "pag" else 1e-10)
    torch._dynamo.reset()


def test_incremental_decoding_keeps_the_eager_step(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("compiled")

    monkeypatch.setattr(compiled_step, "compiled", refuse)
    torch.manual_seed(0)
    model, d = build_model("soft", compile_decoder_step="inductor")
    assert model.decoder.compile_step == "inductor"
    model.eval()
    src, lengths, prev = _batch(d)
    with pytest.raises(AssertionError, match="compiled"):     # a teacher-forced pass compiles
        incremental_and_full(model, src, lengths, prev)
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        state = {}
        for t in range(prev.size(1)):                          # beam search's calls do not
            model.decoder(prev[:, : t + 1], enc, incremental_state=state)


def test_a_half_model_on_a_cpu_keeps_the_eager_step_with_one_warning(monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise AssertionError("compiled")

    monkeypatch.setattr(compiled_step, "compiled", refuse)
    monkeypatch.setattr(compiled_step, "_WARNED", set())
    torch.manual_seed(0)
    model, d = build_model("soft", compile_decoder_step="reduce-overhead")
    model.half().train()
    src, lengths, prev = _batch(d)
    with caplog.at_level("WARNING"):
        for _ in range(2):
            lprobs, _ = model.decoder(prev, model.encoder(src, lengths))
    assert lprobs.dtype == torch.float32 and torch.isfinite(lprobs[prev.ne(d.pad())]).all()
    said = [r.getMessage() for r in caplog.records if "--compile-decoder-step" in r.getMessage()]
    assert said == ["--compile-decoder-step reduce-overhead: a float16 model on a CPU: "
                    "TorchInductor's C++ kernels for it fail to build in this torch; the eager "
                    "step runs"]
    model.float()                                    # float32 compiles
    with pytest.raises(AssertionError, match="compiled"):
        model.decoder(prev, model.encoder(src, lengths))


def test_an_unknown_mode_is_refused_naming_the_option():
    with pytest.raises(ValueError, match="--compile-decoder-step: unknown mode 'graphs'"):
        compiled_step.check_mode("graphs")
    args = argparse.Namespace(arch="acvi_lstm", context_inference="soft",
                              compile_decoder_step="graphs")
    with pytest.raises(ValueError, match="--compile-decoder-step"):
        seq2seq_defaults(args)
    with pytest.raises(ValueError, match="unknown method '_forward'; choose from _recurrent_step"):
        compiled_step.compiled(object, "inductor", "_forward")


@pytest.mark.slow
def test_compiled_training_through_the_cli_logs_the_eager_losses(data_bin, tmp_path):
    """fairseq-train with the step compiled by TorchInductor: the same losses as the eager step
    at every update (dropout 0: no random numbers), then fairseq-generate from its checkpoint."""
    common = ["--dropout", "0", "--context-inference", "soft"]
    eager = train(data_bin, tmp_path / "eager", *common, updates=4)
    comp = train(data_bin, tmp_path / "compiled", *common, "--compile-decoder-step", "inductor",
                 updates=4)
    assert eager.returncode == 0 and comp.returncode == 0, comp.stderr[-3000:]
    a, b = logged(eager.stdout + eager.stderr, "loss"), logged(comp.stdout + comp.stderr, "loss")
    assert len(a) >= 4 and len(a) == len(b)
    assert a == pytest.approx(b, abs=2e-3)          # fairseq logs 3 decimals
    state = checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / "compiled" / "checkpoint_last.pt"))
    assert state["cfg"]["model"].compile_decoder_step == "inductor"
    generate(data_bin, str(tmp_path / "compiled" / "checkpoint_last.pt"))


@pytest.mark.slow
def test_lengths_padded_to_a_multiple_train_the_same_model(data_bin, tmp_path):
    """fairseq's ``--required-seq-len-multiple 16`` (what bounds the compiled step's CUDA graph
    recordings, compiled_step.py) pads the reversal task's sources and targets (≤ 8 tokens) to 16
    with padding only: the same losses."""
    common = ["--dropout", "0", "--context-inference", "acvi", "--mc-samples", "0"]
    plain = train(data_bin, tmp_path / "plain", *common, updates=4)
    padded = train(data_bin, tmp_path / "padded", *common, "--required-seq-len-multiple", "16",
                   updates=4)
    a, b = logged(plain.stdout + plain.stderr, "loss"), logged(padded.stdout + padded.stderr, "loss")
    assert len(a) >= 4 and a == pytest.approx(b, abs=2e-3)


def test_compiling_raises_dynamos_recompile_limit(monkeypatch):
    """One code object serves every decoder configuration and mode: at TorchDynamo's default of 8
    versions the ninth would run eagerly without an error (it did, in a benchmark of four
    variants in two modes)."""
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 8)
    monkeypatch.setattr(compiled_step, "_COMPILED", {})
    compiled_step.compiled(type(build_model("soft")[0].decoder), "inductor")
    assert torch._dynamo.config.recompile_limit == compiled_step.RECOMPILE_LIMIT == 64
