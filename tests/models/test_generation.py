"""Generation (mindspeed_llm/inference/) against ``transformers`` ``generate`` on converted tiny models.

Each family's tiny random HF model (the parity cases of ``test_hf_parity.py`` / ``test_zoo_parity.py``) is
converted with the production converter; three prompts of different lengths, left-padded in one batch,
must give exactly the token ids of HF's greedy ``generate`` (padded batch, ``attention_mask``). The families
cover GQA (Llama), q/k/v bias (Qwen2), sliding windows (Mistral, Gemma2 with softcapping), learned
positions (GPT-2), ALiBi (Bloom), MLA (MiniCPM3), MoE (OLMoE), attention sinks with alternating windows
(GPT-OSS), chunked attention and NoPE layers (Llama 4) and Mamba-2 (the recompute fallback). KV-cache
decoding is checked against recomputing every row's whole sequence each step (ids equal, logits within
1e-5), with a repetition penalty; seeded sampling repeats; beam search gives ``generate(num_beams=N)``'s
best beam (with and without EOS, HF's length penalty and early-stopping rules). Every other registry family
(every parity case of both modules) gives transformers' greedy ids too, at TP 1 and at TP 2; TP 2 (every
family) and Llama at PP 2 run in one 2-process launch.

    python -m pytest tests/models/test_generation.py -q
"""
from __future__ import annotations

import contextlib
import io
import os
from typing import Dict, List, Tuple

import pytest
import torch
import transformers

from core.checkpointing import checkpoint_file, load_file
from core.launcher import run_distributed
from core.models.gpt_model import GPTModel, build_model, build_model_chunks, layout_state
from core.parallel_state import initialize
from core.pipeline_parallel.layout import stage_layers
from core.transformer.config import TransformerConfig
from mindspeed_llm.inference.beam_search import BeamConfig, beam_search
from mindspeed_llm.inference.engine import GenerationConfig, generate, needs_recompute
from mindspeed_llm.inference.sampling import SamplingConfig
from tests.models import test_hf_parity, test_zoo_parity
from tools.convert_ckpt import main as convert_main

FAMILIES = ("llama2_gqa", "qwen2_bias", "mistral_window", "gemma2", "gpt2", "bloom", "minicpm3", "olmoe",
            "gpt_oss", "llama4", "mamba2")
TP2_FAMILIES = ("llama2_gqa", "gemma2", "bloom", "minicpm3", "olmoe")  # greedy at TP 2 too
PROMPT_LENGTHS = (7, 3, 5)
NEW_TOKENS = 6
LOGIT_TOLERANCE = 1e-5


def _case(name: str) -> Tuple:
    return test_hf_parity.CASES.get(name) or test_zoo_parity.CASES[name]


def _hf_model(name: str) -> transformers.PreTrainedModel:
    if name in test_hf_parity.CASES:
        return test_hf_parity.make_hf_model(name)
    return test_zoo_parity.make_hf_model(name)


def _quiet():
    return contextlib.ExitStack() if os.environ.get("GEN_VERBOSE") else _redirected()


@contextlib.contextmanager
def _redirected():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def prompts_for(vocab: int, seed: int = 3) -> List[List[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab, (n,), generator=generator).tolist() for n in PROMPT_LENGTHS]


def hf_left_padded(prompts: List[List[int]]) -> Tuple[torch.Tensor, torch.Tensor]:
    """``prompts`` left-padded with 0 for transformers: input ids and attention mask, each [b, longest]."""
    longest = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), longest, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, longest - len(prompt):] = torch.tensor(prompt)
        mask[row, longest - len(prompt):] = 1
    return ids, mask


def hf_greedy(model: transformers.PreTrainedModel, prompts: List[List[int]], new_tokens: int,
              use_cache: bool = True) -> List[List[int]]:
    """HF's greedy continuation of left-padded ``prompts`` (no EOS stop)."""
    ids, mask = hf_left_padded(prompts)
    longest = ids.size(1)
    model.generation_config.eos_token_id = None
    with _quiet(), torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                             pad_token_id=0, eos_token_id=None, use_cache=use_cache)
    return out[:, longest:].tolist()


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Dict[str, Tuple[transformers.PreTrainedModel, str]]:
    """Every family's HF model and its converted (TP 1) checkpoint directory; Llama also at TP 2."""
    root = tmp_path_factory.mktemp("generation")
    result = {}
    for name in FAMILIES:
        model = _hf_model(name)
        hf_dir, mg_dir = str(root / f"{name}_hf"), str(root / f"{name}_mg")
        with _quiet():
            model.save_pretrained(hf_dir)
            test_hf_parity.convert(hf_dir, mg_dir, _case(name)[3], 1)
            if name in TP2_FAMILIES:
                test_hf_parity.convert(hf_dir, str(root / f"{name}_mg_tp2"), _case(name)[3], 2)
            if name == "llama2_gqa":
                _convert_pp2(hf_dir, str(root / "llama2_gqa_mg_pp2"), _case(name)[3])
        result[name] = (model, mg_dir)
    return result


def _convert_pp2(hf_dir: str, mg_dir: str, family: str) -> None:
    code = convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf_dir,
                         "--save-dir", mg_dir, "--model-type-hf", family, "--target-tensor-parallel-size", "1",
                         "--target-pipeline-parallel-size", "2"])
    assert code == 0


def _load_stage(mg_dir: str, state) -> GPTModel:
    """This pipeline rank's stage of a PP-converted checkpoint."""
    checkpoint = load_file(checkpoint_file(mg_dir, None, 0, state.pp_rank, state.pp, release=True))
    config = TransformerConfig.from_dict(checkpoint["transformer_config"])
    placement = stage_layers(config.num_layers, state.pp)
    model = build_model_chunks(config, state, torch.device("cpu"), 0, placement)[0]
    model.load_state_dict(checkpoint["model"], strict=True)
    return model.eval()


def _ours(mg_dir: str) -> GPTModel:
    return test_zoo_parity.load_ours(mg_dir, layout_state(1))


def test_greedy_equals_transformers_generate(converted) -> None:
    mismatches = []
    for name in FAMILIES:
        model, mg_dir = converted[name]
        prompts = prompts_for(model.config.vocab_size)
        ours = generate(_ours(mg_dir), prompts, GenerationConfig(max_new_tokens=NEW_TOKENS)).token_ids
        expected = hf_greedy(model, prompts, NEW_TOKENS)
        if ours != expected:
            mismatches.append(f"{name}: ours {ours} != transformers {expected}")
    assert not mismatches, "\n".join(mismatches)


# transformers ignores the attention mask of these families in a padded batch (Mamba-1, RWKV and xLSTM have no
# masking of left padding; DeepSeek-V4's compressors pool the padding into their windows, counted in slots, where
# ours count each row's positions); their reference is each prompt generated alone, unpadded
UNPADDED_REFERENCE = ("falcon_mamba", "rwkv", "rwkv_default_widths", "xlstm", "xlstm_wide_keys", "deepseek_v4",
                      "deepseek_v4_sigmoid")
# transformers' cached decoding of these cases fails or departs from its own forward (RWKV's cache is sized by
# hidden_size, not attention_hidden_size; xLSTM's by the v width rounded up to 64, not the layer's; NemotronH's
# one-token step skips the time_step_limit clamp of dt that its prefill applies, as mamba_ssm's step does, and
# the case's limit bites): their reference decodes without the cache
UNCACHED_REFERENCE = ("rwkv", "xlstm_wide_keys", "nemotron_h")


def test_greedy_equals_transformers_generate_for_every_registry_family(tmp_path) -> None:
    """Every parity case (``test_hf_parity`` and ``test_zoo_parity``) beyond FAMILIES, at TP 1: the same
    greedy ids as transformers for three left-padded prompts."""
    mismatches = []
    names = registry_names()
    for name in names:
        model, mg_dir = _converted_case(name, str(tmp_path), 1)
        prompts = prompts_for(model.config.vocab_size)
        ours = generate(_ours(mg_dir), prompts, GenerationConfig(max_new_tokens=NEW_TOKENS)).token_ids
        expected = reference_greedy(name, model, prompts)
        if ours != expected:
            mismatches.append(f"{name}: ours {ours} != transformers {expected}")
    assert len(names) > 100 and not mismatches, "\n".join(mismatches)


def registry_names() -> List[str]:
    """The parity cases beyond FAMILIES (every registry family has at least one)."""
    return [name for name in [*test_hf_parity.CASES, *test_zoo_parity.CASES] if name not in FAMILIES]


def _converted_case(name: str, root: str, tp: int) -> Tuple[transformers.PreTrainedModel, str]:
    """Case ``name``'s HF model and its checkpoint converted at ``tp``."""
    model = _hf_model(name)
    hf_dir, mg_dir = os.path.join(root, f"{name}_hf"), os.path.join(root, f"{name}_mg_tp{tp}")
    with _quiet():
        if not os.path.isdir(hf_dir):
            model.save_pretrained(hf_dir)
        test_hf_parity.convert(hf_dir, mg_dir, _case(name)[3], tp)
    return model, mg_dir


def reference_greedy(name: str, model: transformers.PreTrainedModel, prompts: List[List[int]]) -> List[List[int]]:
    use_cache = name not in UNCACHED_REFERENCE
    if name in UNPADDED_REFERENCE:
        return [hf_greedy(model, [prompt], NEW_TOKENS, use_cache)[0] for prompt in prompts]
    return hf_greedy(model, prompts, NEW_TOKENS, use_cache)


def test_cache_equals_recompute(converted) -> None:
    """Same ids and per-step logits (1e-5) with and without the KV cache, under a repetition penalty."""
    config = GenerationConfig(max_new_tokens=NEW_TOKENS, sampling=SamplingConfig(repetition_penalty=1.3))
    for name in ("llama2_gqa", "gemma2", "bloom", "minicpm3", "gpt2"):
        model, mg_dir = converted[name]
        ours = _ours(mg_dir)
        assert not needs_recompute(ours)
        prompts = prompts_for(model.config.vocab_size, seed=5)
        cached = generate(ours, prompts, config, keep_logits=True, use_cache=True)
        recomputed = generate(ours, prompts, config, keep_logits=True, use_cache=False)
        assert cached.token_ids == recomputed.token_ids, name
        diff = max((a - b).abs().max().item() for a, b in zip(cached.step_logits, recomputed.step_logits))
        assert diff <= LOGIT_TOLERANCE, f"{name}: max abs logit diff {diff}"
    assert needs_recompute(_ours(converted["mamba2"][1]))


def test_bf16_generation(converted) -> None:
    """A bf16 model decodes with its cache (bf16 keys/values) as by recomputation, near the fp32 logits."""
    model, mg_dir = converted["llama2_gqa"]
    checkpoint = load_file(checkpoint_file(mg_dir, None, 0, 0, 1, release=True))
    config = TransformerConfig.from_dict({**checkpoint["transformer_config"], "params_dtype": torch.bfloat16})
    ours = build_model(config, layout_state(1), torch.device("cpu"), seed=0)
    ours.load_state_dict(checkpoint["model"], strict=True)
    prompts = prompts_for(model.config.vocab_size)
    generation = GenerationConfig(max_new_tokens=NEW_TOKENS)
    cached = generate(ours.eval(), prompts, generation, keep_logits=True)
    recomputed = generate(ours, prompts, generation, keep_logits=True, use_cache=False)
    assert cached.token_ids == recomputed.token_ids
    assert max((a - b).abs().max().item() for a, b in zip(cached.step_logits, recomputed.step_logits)) <= 2e-2
    fp32 = generate(_ours(mg_dir), prompts, generation, keep_logits=True)
    assert (cached.step_logits[0] - fp32.step_logits[0]).abs().max().item() <= 5e-2  # the prompt's logits


def test_sampling_reproducible_and_stopping(converted) -> None:
    model, mg_dir = converted["llama2_gqa"]
    ours = _ours(mg_dir)
    prompts = prompts_for(model.config.vocab_size)
    sampling = SamplingConfig(do_sample=True, temperature=1.5, top_k=20, top_p=0.9)
    runs = [generate(ours, prompts, GenerationConfig(max_new_tokens=8, sampling=sampling, seed=seed)).token_ids
            for seed in (7, 7, 8)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    # EOS: a row stops on (and keeps) the eos id; the others run on
    greedy = generate(ours, prompts, GenerationConfig(max_new_tokens=NEW_TOKENS)).token_ids
    eos = greedy[0][2]
    stopped = generate(ours, prompts, GenerationConfig(max_new_tokens=NEW_TOKENS, eos_token_ids=(eos,)))
    for row, full in enumerate(greedy):
        cut = full.index(eos) + 1 if eos in full else len(full)
        assert stopped.token_ids[row] == full[:cut]
        assert stopped.finish_reasons[row] == ("eos" if eos in full else "length")
    # a stop string on the decoded text (ids as words here)
    decode = lambda ids: " ".join(map(str, ids))  # noqa: E731
    stop = generate(ours, prompts, GenerationConfig(max_new_tokens=NEW_TOKENS, stop_strings=(str(greedy[1][1]),)),
                    decode=decode)
    assert stop.token_ids[1] == greedy[1][:2] and stop.finish_reasons[1] == "stop"


def hf_beams(model: transformers.PreTrainedModel, prompts: List[List[int]], new_tokens: int, eos: Tuple[int, ...],
             beams: BeamConfig) -> List[List[int]]:
    """HF's best beam of each left-padded prompt, cut after its first EOS (HF pads the shorter ones)."""
    ids, mask = hf_left_padded(prompts)
    longest = ids.size(1)
    model.generation_config.eos_token_id = None
    with _quiet(), torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                             num_beams=beams.num_beams, length_penalty=beams.length_penalty,
                             early_stopping=beams.early_stopping, pad_token_id=0, eos_token_id=list(eos) or None)
    rows = out[:, longest:].tolist()
    return [row[:next((i + 1 for i, t in enumerate(row) if t in eos), len(row))] for row in rows]


def test_beam_search_equals_transformers(converted) -> None:
    """No EOS, and EOS ids that end some beams early, with HF's length penalty and early-stopping rules."""
    new_tokens, ended_on_eos = 8, 0
    for name in ("llama2_gqa", "gpt2"):
        model, mg_dir = converted[name]
        ours = _ours(mg_dir)
        prompts = prompts_for(model.config.vocab_size)
        plain = beam_search(ours, prompts, GenerationConfig(max_new_tokens=new_tokens), BeamConfig(3)).token_ids
        assert plain == hf_beams(model, prompts, new_tokens, (), BeamConfig(3)), name
        if name != "llama2_gqa":
            continue
        eos = (plain[0][3], plain[1][2])  # tokens the beams meet
        for beams in (BeamConfig(3), BeamConfig(3, 0.5, True), BeamConfig(2, 2.0, "never")):
            config = GenerationConfig(max_new_tokens=new_tokens, eos_token_ids=eos)
            expected = hf_beams(model, prompts, new_tokens, eos, beams)
            for use_cache in (True, False):
                result = beam_search(ours, prompts, config, beams, use_cache=use_cache)
                assert result.token_ids == expected, f"{name} {beams} cache {use_cache}"
            ended_on_eos += sum(reason == "eos" for reason in result.finish_reasons)
    assert ended_on_eos > 0


def test_prompt_longer_than_context_is_refused(converted) -> None:
    ours = _ours(converted["gpt2"][1])
    context = ours.config.max_position_embeddings
    with pytest.raises(ValueError, match=f"prompt 1 has {context + 1} tokens, more than the model's context"):
        generate(ours, [[1, 2], [1] * (context + 1)], GenerationConfig(max_new_tokens=2))


def _parallel_worker(rank: int, world_size: int, tp_jobs: List[Tuple[str, str, List[List[int]]]], pp_dir: str,
                     prompts: List[List[int]]) -> Dict[str, object]:
    """TP 2 (Llama: greedy with and without the cache, seeded sampling; other families: greedy), then PP 2
    (greedy, beam search)."""
    state = initialize(tp=world_size)
    results: Dict[str, object] = {}
    for name, tp_dir, family_prompts in tp_jobs:
        model = test_zoo_parity.load_ours(tp_dir, state)
        if name == "llama2_gqa":
            results.update(_generations(model, family_prompts))
        else:
            results[name] = generate(model, family_prompts, GenerationConfig(max_new_tokens=NEW_TOKENS)).token_ids
    stage = _load_stage(pp_dir, initialize(pp=world_size))
    results["pp_cached"] = generate(stage, prompts, GenerationConfig(max_new_tokens=NEW_TOKENS)).token_ids
    results["pp_recomputed"] = generate(stage, prompts, GenerationConfig(max_new_tokens=NEW_TOKENS),
                                        use_cache=False).token_ids
    results["pp_beams"] = beam_search(stage, prompts, GenerationConfig(max_new_tokens=NEW_TOKENS),
                                      BeamConfig(3)).token_ids
    return results


def _generations(model: GPTModel, prompts: List[List[int]]) -> Dict[str, object]:
    config = GenerationConfig(max_new_tokens=NEW_TOKENS)
    cached = generate(model, prompts, config, keep_logits=True)
    recomputed = generate(model, prompts, config, keep_logits=True, use_cache=False)
    sampling = SamplingConfig(do_sample=True, top_k=10)
    sampled = generate(model, prompts, GenerationConfig(max_new_tokens=NEW_TOKENS, sampling=sampling, seed=3))
    return {"cached": cached.token_ids, "recomputed": recomputed.token_ids, "sampled": sampled.token_ids,
            "logit_diff": max((a - b).abs().max().item() for a, b in zip(cached.step_logits, recomputed.step_logits))}


def test_tp2_and_pp2_equal_transformers(converted, tmp_path) -> None:
    """TP 2 (FAMILIES' TP2 set and every other registry family) and PP 2 in one 2-process launch."""
    model, mg_dir = converted["llama2_gqa"]
    prompts = prompts_for(model.config.vocab_size)
    expected = hf_greedy(model, prompts, NEW_TOKENS)
    expected_beams = hf_beams(model, prompts, NEW_TOKENS, (), BeamConfig(3))
    root = os.path.dirname(mg_dir)
    tp_jobs = [(name, os.path.join(root, f"{name}_mg_tp2"), prompts_for(converted[name][0].config.vocab_size))
               for name in TP2_FAMILIES]
    references = {name: hf_greedy(converted[name][0], family_prompts, NEW_TOKENS)
                  for name, _, family_prompts in tp_jobs[1:]}
    for name in registry_names():
        family_model, tp2_dir = _converted_case(name, str(tmp_path), 2)
        family_prompts = prompts_for(family_model.config.vocab_size)
        tp_jobs.append((name, tp2_dir, family_prompts))
        references[name] = reference_greedy(name, family_model, family_prompts)
    per_rank = run_distributed(2, _parallel_worker, tp_jobs, os.path.join(root, "llama2_gqa_mg_pp2"), prompts)
    wrong = [name for name, expected_family in references.items()
             if not all(result[name] == expected_family for result in per_rank)]
    assert len(references) > 100 and not wrong, f"TP 2 greedy differs from transformers: {wrong}"
    for result in per_rank:
        assert result["cached"] == expected
        assert result["recomputed"] == expected
        assert result["logit_diff"] <= LOGIT_TOLERANCE
        assert result["pp_cached"] == expected and result["pp_recomputed"] == expected
        assert result["pp_beams"] == expected_beams
    assert per_rank[0]["sampled"] == per_rank[1]["sampled"]  # every TP rank draws the same tokens
