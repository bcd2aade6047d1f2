"""Installs the packages ``core`` and ``mindspeed_llm`` and compiles ``csrc/``.

    pip install torch==2.13.0   # the CPU build; any torch in the range below works
    pip install -e .[test]

The pybind11 extension ``core.datasets.helpers_cpp`` is built at install time.
"""
from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import find_packages, setup

extensions = [
    Pybind11Extension("core.datasets.helpers_cpp", ["csrc/helpers.cpp"], cxx_std=17,
                      extra_compile_args=["-O3"]),
]

setup(
    name="mindspeed-llm-suite",
    version="0.1.0",
    description="A Megatron-style LLM training suite with hand-written parallel layers",
    packages=find_packages(include=["core", "core.*", "mindspeed_llm", "mindspeed_llm.*", "tools", "tools.*"]),
    ext_modules=extensions,
    cmdclass={"build_ext": build_ext},
    python_requires=">=3.9",
    install_requires=[
        "torch>=2.4,<2.15",
        "numpy>=1.24",
        "transformers>=4.45",
        "safetensors>=0.4",
        "sentencepiece>=0.1.99",
        "pyyaml>=6.0",
        "tqdm>=4.60",
    ],
    extras_require={
        # peft: tests/unit/test_lora_peft.py (0.17 does not import under transformers 5; 0.21.2 tested);
        # bitsandbytes: tests/unit/test_nf4.py compares its NF4 kernels (CPU backend) with ours (0.50.2 tested);
        # transformers 5.25: the parity tests follow its modeling code (NemotronH's dt clamp to time_step_limit);
        # torchao: tests/unit/test_formats.py compares the MX and NVFP4 casts with its references (0.18 tested)
        "test": ["transformers>=5.25", "pytest>=7", "pytest-xdist>=3.5", "pyarrow>=14", "tensorboard>=2.10",
                 "matplotlib>=3.5", "peft>=0.21", "bitsandbytes>=0.48", "torchao>=0.15"],
        "parquet": ["pyarrow>=14"],
        "npu": ["torch_npu"],
        "tensorboard": ["tensorboard>=2.10"],  # --tensorboard-dir, tools/plot_loss.py on event files
        "wandb": ["wandb>=0.15"],              # --wandb-project
        "plot": ["matplotlib>=3.5"],           # tools/plot_loss.py
        # the recurrent mixers' CUDA kernels (core/transformer/gated_delta_net.py, mamba_mixer.py); CUDA only
        "kernels": ["flash-linear-attention>=0.3", "mamba-ssm>=2.2", "causal-conv1d>=1.4"],
    },
)
