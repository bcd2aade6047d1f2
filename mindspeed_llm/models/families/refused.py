"""The model types of transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING`` the decoder does not cover, each with its reason.

``tools/model_coverage.py`` lists every type of the installed transformers with its status (a registered family,
or one of these reasons) into ``examples/README.md``; ``tests/unit/test_model_coverage.py`` fails when a type is
neither, so a transformers upgrade that adds one asks for a decision. Converting one of these gives the reason in
one line (``registry.refuse``). Three kinds:

* not decoder-only: BERT-style encoders that transformers can run as decoders, and the decoders of
  encoder-decoder models (cross-attention to an encoder);
* audio and multimodal-only: speech and music models; vision-language wrappers whose language model is its own
  ``text_config`` (its model type, covered or not, is named; the towers are the vision-language issue's);
* text decoders with a layer the decoder cannot express exactly (named, and what it would take).
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
    "minimax_m3_vl_text": ("MiniMax-M3's text model: a sparse-attention indexer with its own sparse cache, and its "
                           "checkpoints are multimodal (vision-language) only"),
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
    "axk2": ("A.X-K2's gated RMSNorms (the input norms, and the pre-MLP norm of MoE layers, times sigmoid of a "
             "rank-r SiLU MLP of the normed output) and its MLA query/output-gate projection over the [normed; raw] "
             "query latent have no equivalent in the decoder"),
    "beam": ("Beam's depth-scaled residual adds (branch / sqrt(k) + residual * sqrt((k - 1) / k), k = 2 (layer + 1) "
             "for attention and one more for the MLP), its NoPE layers' query scale (1 + (p + 1) / 2048)^0.1 and its "
             "attention gate's per-head bias have no equivalent in the decoder"),
    "dots3_note_text": ("dots3's text model: an RMSNorm on MLA's shared rope key, sliding-window MLA layers with their "
                        "own heads, latent ranks, head dims and RoPE base beside DSA layers (the decoder's DSA indexes "
                        "every MLA layer, all of one shape) and a per-head output gate on the indexer's layers have no "
                        "equivalent in the decoder"),
    "ergo": ("Ergo's residual gates (each add is sigmoid(w) branch + sqrt(1 + sigmoid(w)) exp(-softplus(w) / 2) "
             "residual with a learned per-channel w) and per-expert RMSNorms on each routed expert's output before "
             "the weighted sum have no equivalent in the decoder"),
    "hy_v4": ("HY-V4's hyper-connections without stream mixing (new streams post * y + X: no comb or Sinkhorn, post "
              "hc_magnitude * sigmoid + hc_eps), MLA with learnable sinks and a sigmoid output gate on its DSA layers, "
              "and a SwiGLU clamp on the routed experts only have no equivalent in the decoder"),
    "kolibri1_1": ("Kolibri 1.1's weightless sparse attention (keys picked by ReLU scores of the first query heads "
                   "against KV head 0 from a block-averaged candidate pool, plus sink and local tokens, on "
                   "NVFP4-rounded keys/values) and its layers reading another layer's keys/values have no equivalent "
                   "(the decoder's DSA is MLA with a learned lightning indexer)"),
    "laguna": ("Laguna's attention output gate is softplus(g_proj x) (the decoder's --attention-output-gate is a "
               "sigmoid), with per-layer query head counts (num_attention_heads_per_layer) and a partial_rotary_factor "
               "per layer kind, which the decoder's one head count and one --rotary-percent cannot hold"),
    "lara_mini": ("Lara-Mini checkpoints fuse the gated DeltaNet's input projections into one linear_attn.in_proj "
                  "(rows [q|k|v|z|b|a]); one HF tensor feeding two of our parameters (in_proj_qkvz, in_proj_ba) is "
                  "something the weight map can read but not write back"),
    "longcat_flash": ("LongCat-Flash's shortcut MoE (each layer's MoE reads the first sub-block's MLP input and is "
                      "added after the second sub-block) and its zero-computation experts (the router may pick an "
                      "identity expert) have no slot in the decoder's layers or MoE"),
    "mimo_v2_flash": ("MiMo-V2-Flash's value heads are narrower than its query/key heads (v_head_dim 128 vs head_dim "
                      "192; the decoder's attention has one head dim outside MLA), its attention sinks are on the "
                      "sliding-window layers only and its values are scaled by attention_value_scale"),
    "zaya": "Zaya's compressed cross-attention projections (CCA) and residual scaling have no equivalent",
    "gemma3n_text": ("Gemma 3n's AltUp (several residual streams predicted and corrected around each layer), Laurel "
                     "low-rank residual blocks, per-layer input embeddings, the last layers reusing earlier layers' "
                     "keys/values and the statistical top-k activation sparsity of its MLPs have no equivalent in "
                     "the decoder"),
}


def _register() -> None:
    for table in (NOT_DECODER_ONLY, AUDIO, MULTIMODAL, NOT_EXPRESSIBLE):
        for model_type, reason in table.items():
            refuse(model_type, reason)


_register()
