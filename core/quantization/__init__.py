"""Weight quantisation for frozen base weights (QLoRA's NF4 storage)."""
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
