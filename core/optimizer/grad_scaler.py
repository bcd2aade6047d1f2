"""Loss scaling for fp16: a constant scale or Megatron's dynamic scaler.

The dynamic scaler halves the scale (``backoff``) after ``hysteresis``
consecutive steps with inf/nan gradients, never below ``min_scale``, and
doubles it (``growth``) after ``growth_interval`` clean steps
(``--loss-scale-window``).
"""
from __future__ import annotations

from typing import Dict


class ConstantGradScaler:
    def __init__(self, scale: float) -> None:
        self.scale = float(scale)

    def update(self, found_inf: bool) -> None:
        pass

    def state_dict(self) -> Dict[str, float]:
        return {"scale": self.scale}

    def load_state_dict(self, state: Dict[str, float]) -> None:
        self.scale = float(state["scale"])


class DynamicGradScaler:
    def __init__(self, initial_scale: float, min_scale: float, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 1000, hysteresis: int = 2) -> None:
        if initial_scale <= 0 or min_scale <= 0 or min_scale > initial_scale:
            raise ValueError("--initial-loss-scale and --min-loss-scale must be positive, min <= initial")
        self.scale = float(initial_scale)
        self.min_scale = float(min_scale)
        self.growth_factor, self.backoff_factor = growth_factor, backoff_factor
        self.growth_interval, self.hysteresis = growth_interval, hysteresis
        self.growth_tracker = 0
        self.hysteresis_tracker = hysteresis

    def update(self, found_inf: bool) -> None:
        if found_inf:
            self.growth_tracker = 0
            self.hysteresis_tracker -= 1
            if self.hysteresis_tracker <= 0:
                self.scale = max(self.scale * self.backoff_factor, self.min_scale)
            return
        self.growth_tracker += 1
        if self.growth_tracker == self.growth_interval:
            self.growth_tracker = 0
            self.hysteresis_tracker = self.hysteresis
            self.scale *= self.growth_factor

    def state_dict(self) -> Dict[str, float]:
        return {"scale": self.scale, "growth_tracker": self.growth_tracker,
                "hysteresis_tracker": self.hysteresis_tracker}

    def load_state_dict(self, state: Dict[str, float]) -> None:
        self.scale = float(state["scale"])
        self.growth_tracker = int(state["growth_tracker"])
        self.hysteresis_tracker = int(state["hysteresis_tracker"])
