"""Context parallelism and per-document attention, on one process.

* The log-sum-exp merge of attention over separate key blocks equals one softmax over all keys, also when
  a block hides every key from some rows; the block backward gives autograd's gradients.
* Ring attention's autograd function on two ranks played by threads over a fake point-to-point exchange:
  outputs and q/k/v gradients of one causal softmax, with and without the send/recv overlap.
* Which tokens a CP rank holds: chunks ``i`` and ``2R - 1 - i`` under load balancing, contiguous parts
  otherwise, Ulysses parts inside a ring rank; every layout covers the sequence once.
* Per-document attention (``--reset-attention-mask``): a token's output does not change when another
  document of its pack changes (RoPE, ALiBi, a sliding window, MLA), while without the flag it does.
* Bad input gets one line naming the flag: sequence lengths that do not split, heads that do not split
  over Ulysses, a Ulysses degree that does not divide CP, a misspelt algorithm, features CP cannot run;
  Mamba layers pass (with documents and CP).

The equivalence of every algorithm and layout with one process is tests/distributed/test_context_parallel.py.

    python -m pytest -q tests/unit/test_context_parallel.py
"""
from __future__ import annotations

import queue
import threading
from typing import List

import pytest
import torch
import torch.distributed as dist

from core.transformer.attention_mask import attention_allowed, document_ids
from core.parallel_state import Group
from core.transformer.context_parallel import (RING, ContextParallel, RingSpec, block_attention,
                                               block_attention_backward, merge_attention, ring_attention,
                                               token_positions)
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args

ARGV = ["--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4", "--ffn-hidden-size", "32",
        "--seq-length", "16", "--max-position-embeddings", "16", "--vocab-size", "8", "--normalization", "RMSNorm",
        "--swiglu", "--disable-bias-linear", "--micro-batch-size", "2", "--global-batch-size", "8",
        "--train-iters", "2", "--lr", "0.1", "--mock-data", "--tokenizer-type", "NullTokenizer", "--device", "cpu",
        "--hidden-dropout", "0", "--attention-dropout", "0", "--make-vocab-size-divisible-by", "1",
        "--init-method-std", "0.3", "--position-embedding-type", "rope"]


# ----------------------------------------------------------------------------------------- the merge
def test_merged_blocks_equal_one_softmax() -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, 3, 6, 4, generator=g), torch.randn(2, 3, 9, 4, generator=g), torch.randn(2, 3, 9, 5,
                                                                                                      generator=g)
    allowed = torch.rand(6, 9, generator=g) > 0.4
    allowed[:, 0] = True  # every row sees some key overall...
    allowed[2, 3:] = False  # ...but row 2 sees none of the last two blocks
    scores = (q @ k.transpose(-1, -2) * 0.5).masked_fill(~allowed, float("-inf"))
    expected = torch.softmax(scores, dim=-1) @ v
    out, lse = torch.zeros(2, 3, 6, 5), torch.full((2, 3, 6), float("-inf"))
    for cols in (slice(0, 3), slice(3, 7), slice(7, 9)):
        block_out, block_lse = block_attention(q, k[:, :, cols], v[:, :, cols], allowed[:, cols], 0.5)
        out, lse = merge_attention(out, lse, block_out, block_lse)
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.allclose(lse, torch.logsumexp(scores, dim=-1), atol=1e-6)


def test_block_backward_equals_autograd() -> None:
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 5, 4, generator=g).requires_grad_() for _ in range(3))
    allowed = torch.ones(5, 5, dtype=torch.bool).tril()
    out, lse = block_attention(q, k, v, allowed, 0.7)
    grad_out = torch.randn(out.shape, generator=g)
    out.backward(grad_out)
    delta = (grad_out * out.detach()).sum(-1)
    grads = block_attention_backward(q.detach(), k.detach(), v.detach(), allowed, 0.7, grad_out, lse.detach(), delta)
    for ours, theirs in zip(grads, (q.grad, k.grad, v.grad)):
        assert torch.allclose(ours, theirs, atol=1e-6)


# ----------------------------------------------------------------------------------------- positions
class _FakeRing:
    """Point-to-point messages between threads standing for ranks, in place of torch.distributed's: each
    thread sets ``local.rank``; a send queues a copy under (sender, receiver, tag), a receive's ``wait`` takes
    it (FIFO per key). Patched over ``P2POp``, ``batch_isend_irecv``, ``isend`` and ``irecv``, wherever the
    ring calls them from."""

    def __init__(self) -> None:
        self.local, self.lock, self.boxes = threading.local(), threading.Lock(), {}

    def box(self, sender: int, receiver: int, tag: int) -> "queue.Queue":
        with self.lock:
            return self.boxes.setdefault((sender, receiver, tag), queue.Queue())

    def isend(self, tensor: torch.Tensor, dst: int, group=None, tag: int = 0):
        self.box(self.local.rank, dst, tag).put(tensor.detach().clone())
        return _Done(lambda: None)

    def irecv(self, tensor: torch.Tensor, src: int, group=None, tag: int = 0):
        box = self.box(src, self.local.rank, tag)
        return _Done(lambda: tensor.copy_(box.get(timeout=60)))

    def p2p_op(self, op, tensor: torch.Tensor, peer: int, group=None, tag: int = 0):
        return (op, tensor, peer, group, tag)

    def batch_isend_irecv(self, ops) -> list:
        return [op(tensor, peer, group, tag) for op, tensor, peer, group, tag in ops]

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in ("isend", "irecv", "batch_isend_irecv"):
            monkeypatch.setattr(dist, name, getattr(self, name))
        monkeypatch.setattr(dist, "P2POp", self.p2p_op)


class _Done:
    def __init__(self, finish) -> None:
        self.finish = finish

    def wait(self) -> bool:
        self.finish()
        return True


@pytest.mark.parametrize("overlap", [False, True])
def test_ring_attention_over_two_fake_ranks_equals_one_softmax(monkeypatch: pytest.MonkeyPatch,
                                                               overlap: bool) -> None:
    """The ring's autograd function on 2 ranks (threads, a fake exchange), load-balanced causal, 4 query heads
    over 2 KV heads: every rank's output and q/k/v gradients equal one causal softmax over the whole sequence
    (each K/V block merged by its log-sum-exp; the K/V gradients travel back to their owner)."""
    fake, seq, ranks = _FakeRing(), 8, 2
    fake.install(monkeypatch)
    g = torch.Generator().manual_seed(4)
    q, k, v = torch.randn(2, 4, seq, 6, generator=g), torch.randn(2, 2, seq, 6, generator=g), torch.randn(2, 2, seq, 5,
                                                                                                        generator=g)
    grad_out = torch.randn(2, 4, seq, 5, generator=g)
    full = [t.clone().requires_grad_() for t in (q, k, v)]
    scores = (full[0] @ full[1].repeat_interleave(2, dim=1).transpose(-1, -2)) * 0.4  # [b, n, s, s]
    scores = scores.masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
    expected = torch.softmax(scores, dim=-1) @ full[2].repeat_interleave(2, dim=1)  # [b, n, s, dv]
    expected.backward(grad_out)
    results: dict = {}

    def rank_main(rank: int) -> None:
        fake.local.rank = rank
        group = Group([0, 1], rank=rank)
        cp = ContextParallel(RING, group, group, Group([rank], rank=0), balanced=True, overlap=overlap)
        mine = cp.ring_positions(seq, rank, q.device)  # [s / 2]: chunks rank and 3 - rank
        local = [t[:, :, mine].clone().requires_grad_() for t in (q, k, v)]
        out = ring_attention(*local, RingSpec(cp, seq, 0.4))
        out.backward(grad_out[:, :, mine])
        results[rank] = (mine, out.detach(), [t.grad for t in local])

    threads = [threading.Thread(target=rank_main, args=(rank,)) for rank in range(ranks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(results) == [0, 1]
    assert sorted(torch.cat([results[r][0] for r in range(ranks)]).tolist()) == list(range(seq))
    for rank, (mine, out, grads) in results.items():
        torch.testing.assert_close(out, expected.detach()[:, :, mine], rtol=1e-5, atol=1e-6, msg=f"rank {rank}")
        for name, grad, reference in zip("qkv", grads, full):
            torch.testing.assert_close(grad, reference.grad[:, :, mine], rtol=1e-5, atol=1e-6,
                                       msg=f"rank {rank} d{name}")


def test_load_balanced_chunks_and_ulysses_parts() -> None:
    assert token_positions(16, 4, 0).tolist() == [0, 1, 14, 15]
    assert token_positions(16, 4, 3).tolist() == [6, 7, 8, 9]
    assert token_positions(16, 2, 1, balanced=False).tolist() == list(range(8, 16))
    assert token_positions(16, 2, 0, ulysses_size=2, ulysses_rank=1).tolist() == [12, 13, 14, 15]
    assert token_positions(8, 1, 0, ulysses_size=4, ulysses_rank=2).tolist() == [4, 5]
    for ring, ulysses, balanced in ((4, 1, True), (2, 2, True), (1, 4, True), (4, 1, False), (2, 2, False)):
        every = torch.cat([token_positions(32, ring, r, ulysses, u, balanced)
                           for r in range(ring) for u in range(ulysses)])
        assert sorted(every.tolist()) == list(range(32)), (ring, ulysses, balanced)


def test_documents_split_at_end_of_document_tokens() -> None:
    tokens = torch.tensor([[4, 7, 5, 5, 7, 1]])
    assert document_ids(tokens, 7).tolist() == [[0, 0, 1, 1, 1, 2]]
    allowed = attention_allowed(torch.arange(6), torch.arange(6), documents=document_ids(tokens, 7))
    assert allowed.shape == (1, 1, 6, 6)
    assert allowed[0, 0, 3].tolist() == [False, False, True, True, False, False]


# ----------------------------------------------------------------------------------------- document masking
def _model(argv: List[str]):
    from core.models.gpt_model import build_model
    from core.parallel_state import single_process_state
    from mindspeed_llm.arguments import transformer_config_from_args

    return build_model(transformer_config_from_args(parse_args(argv)), single_process_state(),
                       torch.device("cpu"), seed=5)


MASKED_KINDS = {
    "rope": [],
    "alibi": ["--position-embedding-type", "alibi"],
    "window": ["--sliding-window", "4"],
    "mla": ["--multi-latent-attention", "--kv-lora-rank", "8", "--qk-head-dim", "4", "--qk-pos-emb-head-dim", "4",
            "--v-head-dim", "4"],
}


@pytest.mark.parametrize("kind", sorted(MASKED_KINDS))
def test_a_tokens_output_ignores_the_other_documents(kind: str) -> None:
    model = _model(ARGV + MASKED_KINDS[kind])
    g = torch.Generator().manual_seed(2)
    pack = torch.randint(0, 7, (1, 16), generator=g)
    pack[0, [4, 11]] = 7  # three documents: 0-4, 5-11, 12-15
    other = pack.clone()
    other[0, :4] = (pack[0, :4] + 1) % 7  # the first document changes, its end stays
    docs = document_ids(pack, 7)
    with torch.no_grad():
        masked = model(pack, document_ids=docs), model(other, document_ids=docs)
        plain = model(pack), model(other)
    assert torch.equal(masked[0][:, 5:], masked[1][:, 5:])  # the later documents do not see the change
    assert not torch.allclose(masked[0][:, :4], masked[1][:, :4])
    assert not torch.allclose(plain[0][:, 5:], plain[1][:, 5:])  # control: causal attention crosses documents


# ----------------------------------------------------------------------------------------- bad input
def _error(extra: List[str], world_size: int) -> str:
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(ARGV + extra), world_size)
    message = str(info.value)
    assert "\n" not in message
    return message


BAD = {
    "ring sequence": (["--context-parallel-size", "4", "--seq-length", "12"], "divisible by 8"),
    "ulysses sequence": (["--context-parallel-size", "4", "--context-parallel-algo", "ulysses_cp_algo",
                          "--seq-length", "14"], "divisible by 4"),
    "ulysses heads": (["--context-parallel-size", "4", "--context-parallel-algo", "ulysses_cp_algo",
                       "--num-attention-heads", "6", "--hidden-size", "24"], "do not split over 4 Ulysses ranks"),
    "hybrid degree": (["--context-parallel-size", "4", "--context-parallel-algo", "hybrid_cp_algo",
                       "--ulysses-degree-in-cp", "3"], "--ulysses-degree-in-cp (3) must be given and divide"),
    "degree without hybrid": (["--context-parallel-size", "4", "--ulysses-degree-in-cp", "2"],
                              "--ulysses-degree-in-cp has no effect without --context-parallel-algo hybrid"),
    "sequence parallel": (["--context-parallel-size", "4", "--context-parallel-algo", "ulysses_cp_algo",
                           "--tensor-model-parallel-size", "2", "--sequence-parallel", "--seq-length", "20",
                           "--num-attention-heads", "8"], "make --seq-length a multiple of CP x TP"),
    "alibi on the ring": (["--context-parallel-size", "2", "--position-embedding-type", "alibi"],
                          "alibi is not supported with --context-parallel-size 2 yet with ring attention"),
    "dropout on the ring": (["--context-parallel-size", "2", "--attention-dropout", "0.1"],
                            "--attention-dropout 0"),
    "overlap without the ring": (["--context-parallel-size", "2", "--context-parallel-algo", "kvallgather_cp_algo",
                                  "--use-cp-send-recv-overlap"], "--use-cp-send-recv-overlap has no effect"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_context_parallel_input_is_one_line(case: str) -> None:
    extra, expected = BAD[case]
    assert expected in _error(extra, 8)


def test_mamba_layers_run_with_documents_and_context_parallelism() -> None:
    """The Mamba state restarts at documents and travels between CP ranks (core/transformer/sequence_state.py)."""
    mamba = [arg for arg in ARGV if arg != "--swiglu"] + ["--hybrid-override-pattern", "MM", "--mamba-head-dim", "8",
                                                          "--mamba-num-groups", "1",
                                                          "--position-embedding-type", "none"]
    for extra in ([], ["--reset-attention-mask"], ["--context-parallel-size", "4", "--reset-attention-mask"],
                  ["--context-parallel-size", "2", "--context-parallel-algo", "ulysses_cp_algo"]):
        validate_args(parse_args(mamba + extra), 4)


def test_a_misspelt_algorithm_names_the_choices(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises((ArgumentError, SystemExit)) as info:
        parse_args(ARGV + ["--context-parallel-algo", "ring"])
    text = str(info.value) + capsys.readouterr().err
    assert "--context-parallel-algo" in text and "megatron_cp_algo" in text


def test_the_valid_layouts_pass() -> None:
    for extra in (["--context-parallel-size", "4"], ["--context-parallel-size", "4", "--context-parallel-algo",
                                                     "hybrid_cp_algo", "--ulysses-degree-in-cp", "2"],
                  ["--context-parallel-size", "2", "--context-parallel-algo", "kvallgather_cp_algo",
                   "--position-embedding-type", "alibi"]):
        validate_args(parse_args(ARGV + extra), 8)
