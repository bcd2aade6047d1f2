"""Checkpoint conversion between Hugging Face (``hf``), our sharded layout (``mg``, also in ``--ckpt-format
torch_dist``) and Megatron-LM / MindSpeed-LLM (``megatron``), LoRA adapters merged or as PEFT's files; the
entry is ``tools/convert_ckpt.py`` (its docstring shows the commands).

One module per format: :mod:`~mindspeed_llm.convert.hf`, :mod:`~mindspeed_llm.convert.native` (mg),
:mod:`~mindspeed_llm.convert.torch_dist`, :mod:`~mindspeed_llm.convert.megatron` and
:mod:`~mindspeed_llm.convert.peft`, each a source and a sink; the shared pieces are the flags
(:mod:`~mindspeed_llm.convert.arguments`), the model at a layout (:mod:`~mindspeed_llm.convert.layout`), the
target's layout (:mod:`~mindspeed_llm.convert.reshard`), the save directory
(:mod:`~mindspeed_llm.convert.files`), the error line (:mod:`~mindspeed_llm.convert.errors`) and the driver
(:mod:`~mindspeed_llm.convert.driver`).

Its model and layout (heads, query groups, TP/PP/VPP, ``num_layer_list``, noop
layers, vocabulary padding, SwiGLU, biases, norm type, tied embeddings, RoPE) are
read from the ``args`` it stores (``mindspeed_llm/models/megatron_format.py``);
its ``linear_qkv`` rows, interleaved per query group with each TP rank holding a
contiguous run of groups, are permuted to ours (``mindspeed_llm/models/qkv_layout.py``);
its layers are numbered within their pipeline chunk. Both norm namings are read
(``input_layernorm`` and Transformer Engine's ``linear_qkv.layer_norm_weight``);
``--transformer-impl`` picks the one written (``local``, MindSpeed-LLM's, by
default). Megatron records only ``padded_vocab_size``: ``--vocab-size`` gives the
real vocabulary (else the padded rows are kept as vocabulary), and
``--model-type-hf`` the family (else ``llama2``). Settings the decoder does not
model (MoE ``num_experts``, MLA, learned absolute positions, ...) are refused with
one line naming the ``args`` key; so is a target TP that does not divide the
key/value groups (Megatron splits them, it never replicates them), or a model
whose behaviour flags Megatron's ``args`` cannot express. Objects in the files
other than tensors and plain values (numpy RNG states, enums in ``args``) load as
inert placeholders (``core.checkpointing.map_foreign_file``): no code from the
file runs.

Pipeline layout flags (Megatron/MindSpeed names, for ``--save-model-type mg``):
``--target-pipeline-parallel-size N``, ``--num-layer-list 3,5,...`` (layers per
stage), ``--num-layers-per-virtual-pipeline-stage K`` or
``--virtual-pipeline-model-parallel-size V`` (interleaved chunks), and
``--noop-layers i,j`` (parameterless layer slots, by global layer number). The
placement is the production one (``core/pipeline_parallel/layout.py``) and the
parameter names and shapes are those of the model chunks training builds
(``core/models/gpt_model.py``, on the meta device). Noop layers exist only in
Megatron checkpoints: Hugging Face layer ``j`` is the ``j``-th non-noop layer,
so ``--num-layers`` (optional, checked when given) is the HF layer count plus
the number of noop layers. A Megatron source's layout (TP, PP, VPP,
``--num-layer-list``, noop layers) is read from its checkpoint; from mg to mg
the noop layers are kept unless ``--noop-layers`` is given (``""`` for none).

What it writes:

* ``mg``: ``<save-dir>/release/mp_rank_TT[_PPP]/model_optim_rng.pt`` per TP rank
  ``TT`` and pipeline stage ``PPP`` (the suffix only when PP > 1) with
  ``model`` (state dict; ``model0``, ``model1``, ... per virtual chunk),
  ``args`` (Megatron flag-style namespace: TP, PP, virtual pipeline sizes,
  ``num_layer_list``, ``noop_layers``, ...), ``transformer_config``,
  ``hf_config`` (the source ``config.json``, so the way back gives an
  equivalent config), ``checkpoint_version`` and ``iteration`` = 0; then
  ``latest_checkpointed_iteration.txt`` = ``release``, last. With tied
  embeddings and PP > 1 the last stage also holds ``output_layer.weight``, the
  copy of the word embeddings that training keeps there.
* ``hf``: ``model.safetensors`` (or ``model-0000k-of-0000n.safetensors`` shards
  plus ``model.safetensors.index.json`` when larger than ``--max-shard-size``)
  and ``config.json``, last.

Every tensor goes through one canonical form, the Hugging Face tensors of the
registry's weight map (``mindspeed_llm/models/registry.py``), and is split or
joined over TP with the production shard specs (``param_meta(param).tp_shard`` of a
``GPTModel`` built on the meta device). Parameter names carry global layer
numbers, so joining pipeline stages is a union of their state dicts (the last
stage's tied-embedding copy is dropped). The source is read once: each tensor
is read, checked and split for the target on two worker threads, a few tensors
ahead of the writes, which stay in order on the main thread. Memory stays far
below the model's size: an HF source is read one tensor at a time (each shard
mapped only for that read); a Megatron source's rank files are memory-mapped
once, each read copies the ranks' pieces into place in the full tensor
(:meth:`TPShard.place`; a tensor replicated over TP is read from rank 0 only)
and drops the pieces' pages (:func:`native.release_pages`); an mg target gets
each tensor slice written into its (rank, stage) file as it arrives
(:class:`core.checkpointing.StreamingCheckpoint`: no file is held in memory)
and the file closed after its last parameter; an HF target's shards and
headers are planned from the source's headers, and each tensor's bytes are
written once, at their offset in the final shard; freed tensors go back to the
OS at once (:func:`driver.return_large_frees_to_the_os`). ``bench/convert.py``
measures it (TinyLlama's 1.1B shape, bf16, HF -> TP2xPP2 -> HF: peak RSS
0.56 GB to mg and 0.42 GB to hf, of which 0.22 GB is the imported torch,
against 2.49 GB for transformers' from_pretrained + save_pretrained). Any input
error (missing directory, config or tensor; unknown family; a TP size that does
not divide the heads; a layer list of the wrong length or sum; a PP size that
does not divide the layers; a noop layer out of range; an incompatible virtual
pipeline; an unsupported ``model_type``; an index naming a missing shard; a
tensor the weight map needs that the checkpoint lacks) is one line on stderr,
naming the family and the tensor or file, with exit code 2, detected before
anything is written. The output is written into a temporary sibling directory
(``.<name>.converting-<pid>``) and renamed to ``--save-dir`` at the end, its
tracker / ``config.json`` last (:func:`publish`); a run that fails midway
removes it, so nothing partial looks complete and an earlier conversion in
``--save-dir`` stays intact.

``--save-dir`` is never overwritten by accident: when it already holds a
checkpoint of the target's kind (mg / megatron: a tracker, ``release/`` or
``iter_*`` directories, e.g. a training run's ``--save``, whose tracker would
lose its resume point; hf: ``config.json`` or ``*.safetensors``; PEFT: the
adapter files) the conversion stops with one line naming the directory and
``--overwrite``, before anything is written, and the directory is left
byte-for-byte as it was. With ``--overwrite`` the earlier checkpoint of that
kind is replaced (``iter_*`` directories and other files stay). A tensor
holding NaN or Inf (a diverged run) is refused with one line naming the
tensor and its source file, and nothing is written; ``--allow-non-finite``
exports it with a warning; so is a value ``--params-dtype fp16`` cannot hold
(it would become Inf). A Megatron source without its tracker (a training
run's ``--save`` whose tracker was lost) gives its newest complete
iteration (``checkpoint_complete`` marker), as training's ``--load`` does; a
tracker naming a missing iteration, an unreadable tracker and a truncated
safetensors file are one line each. Files get the usual permissions (``umask``).

``--model-type-hf`` takes MindSpeed's names (``llama2``, ``mistral``,
``qwen``, ...) and HF ``model_type`` strings (``llama``, ``qwen2``, ...);
without it the family is config.json's ``model_type`` (hf) or the one the
checkpoint recorded (mg).
"""
