"""The registry's families, one module per kind of model; each module registers its families at import.

``registry.py`` imports every module of this package (:func:`mindspeed_llm.models.registry._load_family_modules`),
so a new module needs no edit elsewhere.
"""
