"""A request as the worker knows it, including what no policy may see."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import numpy as np

from reference.shapes import RequestView, Slo


@dataclass(frozen=True, eq=False)
class Request:
    """One client request of a workload.

    ``prompt`` is a read-only int32 array of token ids built from blocks, so requests of
    one prefix group share their leading tokens. ``output_tokens`` is the true output
    length (<= max_new_tokens): the worker uses it to end the request, and no policy sees
    it. ``index`` is the request's position in its workload; it breaks event ties.
    """
    index: int
    id: str
    scope: str
    cls: str
    arrival_s: float
    prompt: np.ndarray
    max_new_tokens: int
    output_tokens: int
    slo: Slo
    cancel_at_s: Optional[float] = None

    @cached_property
    def prompt_tokens(self) -> int:
        # Read at every admission, lookup and publish; the prompt never changes.
        return int(self.prompt.shape[0])

    def view(self) -> RequestView:
        return RequestView(id=self.id, scope=self.scope, prompt_tokens=self.prompt_tokens,
                           max_new_tokens=self.max_new_tokens, slo=self.slo, cls=self.cls)
