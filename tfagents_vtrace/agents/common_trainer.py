"""The end of a training run, shared by the agents that drive their own loop (A3C, ACER).

A3C (Mnih et al. 2016, https://arxiv.org/abs/1602.01783) and ACER (Wang et al. 2016,
https://arxiv.org/abs/1611.01224) finish a run the way the IMPALA runtime does: the final
evaluation row is written, the evaluator closed, a last checkpoint saved, the greedy policy
exported when ``run_config.export_policy`` asks for it, and a final row returned.
"""

from __future__ import annotations

import os


def finish_run(
    trainer, network, last_eval: dict, solved_wall: float | None, step: int, **extra
) -> dict:
    """Closes ``trainer``'s run and returns its final row.

    ``trainer`` has ``evaluator``, ``metrics``, ``save()``, ``wall_time()``, ``run_config``
    and ``logdir``; ``network`` is the (already final) network to export; ``last_eval`` the
    newest evaluation row (``step``, ``eval_return``); ``solved_wall`` the wall time at which
    ``stop_return`` was reached, or None. The row holds ``final``, ``step``, ``wall_time``,
    ``train_wall_time`` (before the export), ``solve_wall_time``, ``solve_step`` and
    ``eval_return``, then ``extra`` in the order given.
    """
    trainer.evaluator.close()
    trainer.save()
    train_wall = trainer.wall_time()
    if trainer.run_config.export_policy:
        from tfagents_vtrace.export import export_policy

        export_policy(network, os.path.join(trainer.logdir, "policy"), overwrite=True)
    trainer.metrics.close()
    return {
        "final": True,
        "step": int(step),
        "wall_time": round(trainer.wall_time(), 3),
        "train_wall_time": round(train_wall, 3),
        "solve_wall_time": solved_wall,
        "solve_step": last_eval["step"] if solved_wall is not None else None,
        "eval_return": last_eval["eval_return"],
        **extra,
    }
