"""docs/options.md is what ``fairseq-acvi-options-reference`` writes now, and names every option
that a parser of the plugin defines (models, criteria, tasks, optimizers), every preset and every
context-inference variant's defaults."""
import argparse

import pytest

import fairseq_acvi  # noqa: F401  (registers the plugin)
from conftest import REPO
from fairseq_acvi.cli import options_reference

DOC = REPO / "docs" / "options.md"


@pytest.fixture(scope="module")
def rendered():
    return options_reference.render()


def test_the_page_is_what_the_generator_writes_now(rendered):
    assert DOC.read_text(encoding="utf-8") == rendered, (
        "docs/options.md is out of date: run `fairseq-acvi-options-reference` from the repository root")


def _flags_of(parser):
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--")]


def _plugin_parsers():
    """Every parser of the plugin, collected here from fairseq's registries (not from the generator)."""
    from fairseq.dataclass.utils import gen_parser_from_dataclass
    from fairseq.models import MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY
    from fairseq.registry import REGISTRIES
    from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY
    tables = [(MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY), (TASK_REGISTRY, TASK_DATACLASS_REGISTRY)]
    tables += [(r["registry"], r["dataclass_registry"]) for r in REGISTRIES.values()]
    out = {}
    for classes, dataclasses in tables:
        for name, cls in classes.items():
            if not cls.__module__.startswith("fairseq_acvi"):
                continue
            parser = argparse.ArgumentParser(add_help=False)
            if name in dataclasses:
                gen_parser_from_dataclass(parser, dataclasses[name]())
            else:
                cls.add_args(parser)
            out[name] = parser
    return out


def test_every_option_of_every_plugin_parser_is_documented(rendered):
    parsers = _plugin_parsers()
    assert {"acvi_lstm", "acvi_transformer", "acvi_pointer_generator", "acvi_video_captioner",
            "memn2n", "t_memn2n", "elbo", "t_divergence", "qa_cross_entropy", "babi_qa",
            "torch_adam"} <= set(parsers)
    missing = {name: [f for f in _flags_of(p) if f"`{f}`" not in rendered]
               for name, p in parsers.items()}
    assert not any(missing.values()), missing
    for name in parsers:
        assert f"### `{name}`" in rendered
    for size in ("--encoder-embed-dim", "--encoder-hidden-size", "--encoder-layers",
                 "--decoder-hidden-size", "--acvi-beta", "--acvi-kl-delay-updates"):
        assert f"`{size}`" in rendered


def test_presets_show_the_values_their_arch_function_sets(rendered):
    from fairseq.models import ARCH_CONFIG_REGISTRY
    args = argparse.Namespace()
    ARCH_CONFIG_REGISTRY["acvi_lstm"](args)
    section = rendered.split("### `acvi_lstm` (model `acvi_lstm`)")[1].split("### ")[0]
    assert f"| `--encoder-hidden-size` | `{args.encoder_hidden_size!r}` |" in section
    assert f"| `--encoder-layers` | `{args.encoder_layers!r}` |" in section
    multi30k = rendered.split("### `acvi_lstm_multi30k`")[1].split("### ")[0]
    assert "| `--encoder-layers` | `1` |" in multi30k and "`--encoder-hidden-size`" not in multi30k


def test_variant_defaults_are_listed(rendered):
    from fairseq_acvi.modules.context import CONTEXT_REGISTRY
    for name, cls in CONTEXT_REGISTRY.items():
        assert f"### `{name}`" in rendered
        for key, value in cls.DEFAULTS.items():
            assert f"`--{key.replace('_', '-')}`" in rendered, (name, key)
    acvi = rendered.split("### `acvi`\n")[1].split("### ")[0]
    beta = CONTEXT_REGISTRY["acvi"].DEFAULTS["acvi_beta"]
    assert f"| `--acvi-beta` | `{beta!r}` |" in acvi


def test_check_mode_names_the_command_on_a_stale_page(tmp_path, capsys, rendered):
    page = tmp_path / "options.md"
    page.write_text(rendered.replace("`--acvi-beta`", "`--acvi-betaa`", 1), encoding="utf-8")
    assert options_reference.main(["--out", str(page), "--check"]) == 1
    assert "run `fairseq-acvi-options-reference`" in capsys.readouterr().err
    assert options_reference.main(["--out", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == rendered
    assert options_reference.main(["--out", str(page), "--check"]) == 0
