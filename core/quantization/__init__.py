"""Quantisation: NF4 storage of frozen base weights (QLoRA) and the low-precision number formats
(:mod:`core.quantization.formats`: FP8 E4M3/E5M2, E8M0, FP4 E2M1, MXFP8/MXFP4, NVFP4, HiF8)."""
from core.quantization.nf4 import (
    ABSMAX_BLOCKSIZE,
    NF4_BLOCKSIZE,
    NF4State,
    QuantizationError,
    dequantize_nf4,
    dynamic_code,
    nf4_code,
    nf4_kernel,
    quantize_nf4,
)
from core.quantization.nf4_linear import (
    NF4Tensor,
    check_quantization_targets,
    dequantized_state_dict,
    quantize_linear_,
    quantize_module_linears,
)

__all__ = [
    "ABSMAX_BLOCKSIZE", "NF4_BLOCKSIZE", "NF4State", "NF4Tensor", "QuantizationError", "check_quantization_targets",
    "dequantize_nf4", "dequantized_state_dict",
    "dynamic_code", "nf4_code", "nf4_kernel", "quantize_linear_", "quantize_module_linears", "quantize_nf4",
]
