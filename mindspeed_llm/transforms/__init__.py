"""Model transforms: changes applied to a built model through one protocol (``base.py``), found in one registry.

``base.py`` holds the protocol and the registry; ``registry.py`` builds the run's transforms from the flags
(the trainer and the runtime know only these two modules). The built-in transforms are ``lora.py`` (adapters
on the targeted linears), ``qlora.py`` (LoRA over an NF4-stored base), ``fp8.py`` (FP8 linears) and
``dsa_warmup.py`` (DeepSeek-V3.2's dense warm-up: the indexers alone train); ``peft_format.py`` reads and writes PEFT adapter directories for LoRA
and QLoRA and for ``tools/convert_ckpt.py``.
"""
