"""Pure tensor ops: V-trace, DI-engine V-trace losses, returns/GAE, Retrace, TAAC.

Each submodule is one topic with explicit ``__all__``; import the module and call its
functions (``from tfagents_vtrace.ops import vtrace; vtrace.from_logits(...)``). All ops are
time-major ``[T, B, ...]``, validate their inputs and return namedtuples (or a tensor when
there is a single output), with targets wrapped in ``tf.stop_gradient``.
"""

from tfagents_vtrace.ops import ding, retrace, returns, taac, vtrace

__all__ = ["ding", "retrace", "returns", "taac", "vtrace"]
