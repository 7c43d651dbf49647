"""Replay of recent unrolls for IMPALA: a FIFO of whole unrolls mixed into each batch.

Espeholt et al., "IMPALA", 2018, https://arxiv.org/abs/1802.01561, Section 5.2.2 (and the
replay of Appendix F): part of every learner batch is drawn uniformly from a buffer of recent
unrolls. Each stored unroll keeps its own behaviour-policy parameters (``policy``) and the
recurrent state it started from (``state``), so V-trace corrects for the policy having moved
since it acted and an LSTM replays from the right state. The buffer holds recent data only
and is not checkpointed: a resumed run refills it within ``capacity`` unrolls.
"""

from __future__ import annotations

import collections

import numpy as np

__all__ = ["UnrollReplay", "replayed_per_batch"]


def replayed_per_batch(replay_ratio: float, fresh_per_batch: int) -> int:
    """Replayed unrolls in a batch of ``fresh_per_batch`` fresh ones: ``replay_ratio`` times
    it, which must be a whole number (so every batch has the same B)."""
    k = replay_ratio * fresh_per_batch
    if abs(k - round(k)) > 1e-9:
        raise ValueError(
            f"replay_ratio: replay_ratio * batch_unrolls must be a whole number of unrolls, "
            f"received {replay_ratio} * {fresh_per_batch} = {k}"
        )
    return int(round(k))


class UnrollReplay:
    """The ``capacity`` most recent unrolls; :meth:`mix` builds a batch's list of unrolls.

    Args:
      capacity: unrolls kept (>= 1); 0 picks ``8 * max(1, replayed)`` per batch.
      replayed: replayed unrolls per batch (see :func:`replayed_per_batch`).
      seed: seeds the uniform draws.
    """

    def __init__(self, capacity: int, replayed: int, seed: int = 0):
        if replayed < 0:
            raise ValueError(f"replayed: expected an int >= 0, received {replayed!r}")
        capacity = capacity or 8 * max(1, replayed)
        self.replayed = int(replayed)
        self._buffer: collections.deque = collections.deque(maxlen=int(capacity))
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self._buffer)

    @property
    def capacity(self) -> int:
        return int(self._buffer.maxlen)

    def mix(self, fresh: list[dict]) -> list[dict]:
        """``fresh`` followed by ``replayed`` unrolls drawn uniformly (without replacement
        while the buffer holds enough) from the buffer as it was before ``fresh`` arrived;
        then ``fresh`` joins the buffer. While the buffer is empty, the draws come from
        ``fresh`` itself, so every batch has the same size."""
        if not self.replayed:
            return list(fresh)
        pool = list(self._buffer) or list(fresh)
        replace = len(pool) < self.replayed
        picks = self._rng.choice(len(pool), self.replayed, replace=replace)
        self._buffer.extend(fresh)
        return list(fresh) + [pool[i] for i in picks]
