"""Hand-written tensor parallelism: mappings, layers, cross-entropy and RNG tracking."""
from core.tensor_parallel.cross_entropy import vocab_parallel_cross_entropy
from core.tensor_parallel.layers import (
    ColumnParallelLinear,
    RowParallelLinear,
    Segment,
    TPShard,
    VocabParallelEmbedding,
    reduce_replicated_grads,
)

__all__ = [
    "ColumnParallelLinear", "RowParallelLinear", "Segment", "TPShard", "VocabParallelEmbedding",
    "reduce_replicated_grads", "vocab_parallel_cross_entropy",
]
