"""The model types of transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING`` the decoder does not cover, each with its reason.

``tools/model_coverage.py`` lists every type of the installed transformers with its status (a registered family,
or one of these reasons) into ``examples/README.md``; ``tests/unit/test_model_coverage.py`` fails when a type is
neither, so a transformers upgrade that adds one asks for a decision. Converting one of these gives the reason in
one line (``registry.refuse``). Four kinds:

* not decoder-only: BERT-style encoders that transformers can run as decoders, and the decoders of
  encoder-decoder models (cross-attention to an encoder);
* audio and multimodal-only: speech and music models; vision-language wrappers whose language model is its own
  ``text_config`` (its model type, covered or not, is named; the towers are the vision-language issue's);
* text decoders with a layer the decoder cannot express exactly (named);
* text decoders not yet checked against the decoder: the layers that differ from covered families are named.
"""
from __future__ import annotations

from typing import Dict

from mindspeed_llm.models.registry import refuse

ENCODER = ("a BERT-style bidirectional encoder (post-norm, learned absolute and token-type embeddings) that "
           "transformers can run as a decoder; not a decoder-only LM")
ENCODER_DECODER = "the decoder of an encoder-decoder model (cross-attention to an encoder); not a decoder-only LM"
NOT_DECODER_ONLY: Dict[str, str] = {
    **{name: ENCODER for name in ("bert", "bert-generation", "big_bird", "camembert", "data2vec-text", "electra",
                                  "ernie", "megatron-bert", "rembert", "roberta", "roberta-prelayernorm", "roc_bert",
                                  "roformer", "xlm-roberta", "xlm-roberta-xl", "xmod")},
    "xlm": "XLM: a cross-lingual encoder with language embeddings; not a decoder-only LM",
    **{name: ENCODER_DECODER for name in ("bart", "bigbird_pegasus", "blenderbot", "blenderbot-small", "marian", "mbart",
                                          "mvp", "pegasus", "plbart", "prophetnet", "whisper", "trocr")},
    "xlnet": "XLNet: a permutation language model with two-stream relative attention; not a causal decoder",
    "reformer": "Reformer: LSH attention over hashed buckets and reversible layers; not expressible exactly",
}
AUDIO: Dict[str, str] = {
    "musicgen": "audio: MusicGen's codebook decoder of an encoder-decoder (text encoder, audio codec)",
    "musicgen_melody": "audio: MusicGen-Melody's codebook decoder conditioned on a chroma encoder",
    "moshi": "audio: Moshi's speech-text model with a depth decoder over audio codebooks",
    "moss_transcribe_diarize": "audio: speech recognition and diarisation from an audio encoder",
}


def multimodal(text: str, towers: str) -> str:
    return (f"multimodal-only: {towers} beside a language model whose config is its text_config ({text}); the towers "
            "are the vision-language issue's")


MULTIMODAL: Dict[str, str] = {
    "gemma3": multimodal("gemma3_text, covered", "a SigLIP vision tower"),
    "gemma3n": multimodal("gemma3n_text, not covered", "vision and audio towers"),
    "gemma4": multimodal("gemma4_text", "vision and audio towers"),
    "gemma4_unified": multimodal("gemma4_unified_text", "vision and audio towers"),
    "gemma4_assistant": "multimodal-only: Gemma 4's assistant head over a Gemma 4 model's states",
    "gemma4_unified_assistant": "multimodal-only: the unified Gemma 4's assistant head over its states",
    "llama4": multimodal("llama4_text, covered", "a vision tower"),
    "mllama": multimodal("mllama_text_model, with cross-attention layers to the image", "a vision tower"),
    "qwen3_5": multimodal("qwen3_5_text, covered", "Qwen3-VL's vision tower"),
    "qwen3_5_moe": multimodal("qwen3_5_moe_text, covered", "Qwen3-VL's vision tower"),
    "dots3_note": multimodal("dots3_note_text, not covered", "vision and audio towers"),
    "emu3": multimodal("emu3_text_model", "a VQ image tokenizer"),
    "fuyu": multimodal("a Persimmon decoder", "patch embeddings of raw image pixels"),
    "got_ocr2": multimodal("a Qwen2 decoder", "a SAM vision encoder"),
    "phi4_multimodal": multimodal("a Phi-3 decoder with LoRA adapters per modality", "vision and audio towers"),
    "git": "multimodal-only: GIT's image-conditioned text decoder (a BERT-style stack over image tokens)",
    "blt": ("BLT (Byte Latent Transformer): byte-level local encoder and decoder with cross-attention around a "
            "global patch transformer; not a token decoder"),
    "apertus1p5_text": "multimodal-only: Apertus 1.5's text model reads its own vision and audio tokenizers' codes",
    "minimax_m3_vl_text": "MiniMax-M3's text model: a sparse-attention indexer with its own sparse cache; not covered yet",
}
NOT_EXPRESSIBLE: Dict[str, str] = {
    "diffllama": "differential attention (two softmax maps subtracted with a learned lambda per layer) has no "
                 "equivalent in the decoder",
    "doge": "Doge's dynamic mask attention and cross-domain MoE (product-key experts) have no equivalent in the decoder",
    "dory": "Dory's past-reader layers (attention over a compressed memory of earlier segments) have no equivalent",
    "hrm_text": "HRM's hierarchical recurrent stack (a high-level and a low-level module looping) has no equivalent",
    "inkling_text": "Inkling's relative logits, normed embeddings and short convolutions inside attention have no "
                    "equivalent",
    "inkling2_text": "Inkling 2's relative position bias, L2-clipped projections and dynamic short convolutions have no "
                     "equivalent",
    "inkling2_loop_text": "Inkling 2 Loop's looped layers with message gates have no equivalent",
    "cpmant": "CPM-Ant's segment position embedding (bucketed relative bias per segment pair) and prompt tokens have "
              "no equivalent",
    "openai-gpt": "GPT-1's post-norm residuals LayerNorm(x + f(x)) have no equivalent (the decoder norms before or "
                  "after each branch, inside the residual)",
    "zaya": "Zaya's compressed cross-attention projections (CCA) and residual scaling have no equivalent",
}
NOT_YET: Dict[str, str] = {
    "afmoe": "not covered yet: AFMoE's token-choice router and gated attention with per-layer sliding windows",
    "axk1": "not covered yet: AXK1's MLA attention with its own top-k router (DeepSeek-V3 / GLM-4.7-Flash layers)",
    "axk2": "not covered yet: AXK2's DSA indexer with gated MLPs beside its MoE",
    "beam": "not covered yet: Beam's attention and MoE router (DeepSeek-V3.2 and Olmo3 elements)",
    "cohere2_moe": "not covered yet: Cohere's parallel layer with a top-k MoE MLP",
    "ctrl": "not covered yet: CTRL's sinusoidal positions on sqrt(d)-scaled embeddings under its own tensor names",
    "dots3_note_text": "not covered yet: dots3's text model with a DSA-style indexer beside its MoE",
    "ergo": "not covered yet: Ergo's expert norms, fp32-output router and residual gates",
    "exaone_moe": "not covered yet: EXAONE MoE's router with per-layer sliding windows (EXAONE 4 attention)",
    "flint": "not covered yet: Flint's MoE with GPT-OSS style attention sinks",
    "gemma3n_text": "not covered yet: Gemma 3n's AltUp, Laurel blocks, per-layer embeddings and activation sparsity",
    "hy_v4": "not covered yet: HY-V4's DSA indexer with hyper-connections (DeepSeek-V4 elements)",
    "kolibri1": "not covered yet: Kolibri's attention and MoE (EXAONE 4 / Qwen3-MoE elements)",
    "kolibri1_1": "not covered yet: Kolibri 1.1's DSA-style indexer",
    "laguna": "not covered yet: Laguna's MoE with gated attention and per-layer head counts",
    "lara_mini": "not covered yet: Lara-Mini's gated DeltaNet with MoE and Flint-style attention",
    "longcat_flash": "not covered yet: LongCat-Flash's zero-computation experts and two MLA blocks per layer",
    "mellum": "not covered yet: Mellum's MoE attention (Laguna / Qwen3-MoE elements)",
    "mimo_v2_flash": "not covered yet: MiMo-V2-Flash's hybrid sliding/full attention with sinks and its MoE",
    "minicpm5_moe": "not covered yet: MiniCPM5's MoE on DeepSeek-V3 style attention with MiniCPM's scales",
}


def _register() -> None:
    for table in (NOT_DECODER_ONLY, AUDIO, MULTIMODAL, NOT_EXPRESSIBLE, NOT_YET):
        for model_type, reason in table.items():
            refuse(model_type, reason)


_register()
