"""``--swap-optimizer``: AdamW whose moments live in host memory.

The exponential moments (``exp_avg``, ``exp_avg_sq``: 8 bytes per parameter
in fp32) stay on the host (pinned when the device is an accelerator). The step
streams them to the device in chunks of about ``chunk_elements`` parameters,
updates those parameters with PyTorch's AdamW arithmetic (decoupled weight
decay), and streams the moments back, so device memory holds one chunk of
optimizer state at a time. On the CPU host and device are the same and the
very same code path runs (the copies are cheap), which is how it is tested.
"""
from __future__ import annotations

from typing import Dict, Iterable, List

import torch
from torch.optim.adam import adam

from core.device import pins_host_memory

MOMENTS = ("exp_avg", "exp_avg_sq")


class SwapAdamW(torch.optim.Optimizer):
    def __init__(self, params: Iterable, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, chunk_elements: int = 1 << 24) -> None:
        if chunk_elements <= 0:
            raise ValueError(f"--swap-optimizer-chunk-size {chunk_elements} must be positive")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.chunk_elements = chunk_elements

    def _host_state(self, param: torch.Tensor) -> Dict[str, torch.Tensor]:
        state = self.state[param]
        if not state:
            pin = pins_host_memory(param.device)
            for key in MOMENTS:
                state[key] = torch.zeros(param.shape, dtype=torch.float32, device="cpu", pin_memory=pin)
            state["step"] = torch.zeros((), dtype=torch.float32)
        return state

    def _chunks(self, params: List[torch.Tensor]) -> Iterable[List[torch.Tensor]]:
        chunk, size = [], 0
        for param in params:
            chunk.append(param)
            size += param.numel()
            if size >= self.chunk_elements:
                yield chunk
                chunk, size = [], 0
        if chunk:
            yield chunk

    def load_state_dict(self, state_dict: Dict) -> None:
        super().load_state_dict(state_dict)  # moves moments next to their parameters: send them home
        for state in self.state.values():
            for key in MOMENTS:
                if key in state:
                    state[key] = state[key].to("cpu", torch.float32)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            for chunk in self._chunks(params):
                self._step_chunk(group, chunk)
        return None

    def _step_chunk(self, group: Dict, params: List[torch.Tensor]) -> None:
        states = [self._host_state(p) for p in params]
        device_moments = {key: [s[key].to(p.device, non_blocking=True) for s, p in zip(states, params)]
                          for key in MOMENTS}  # host -> device
        steps = [s["step"] for s in states]
        beta1, beta2 = group["betas"]
        adam(params, [p.grad for p in params], device_moments["exp_avg"], device_moments["exp_avg_sq"], [], steps,
             foreach=False, decoupled_weight_decay=True, amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
             weight_decay=group["weight_decay"], eps=group["eps"], maximize=False)
        for key in MOMENTS:  # device -> host
            for state, moment in zip(states, device_moments[key]):
                if moment.data_ptr() != state[key].data_ptr():
                    state[key].copy_(moment, non_blocking=True)
