"""Model transforms: changes applied to a built model through one protocol (``base.py``), found in one registry.

``base.py`` holds the protocol and the registry; ``registry.py`` builds the run's transforms from the flags
(the trainer and the runtime know only these two modules). The built-in transforms are ``lora.py`` (adapters
on the targeted linears) and ``qlora.py`` (LoRA over an NF4-stored base); ``peft_format.py`` reads and writes
PEFT adapter directories for them and for ``tools/convert_ckpt.py``.
"""
