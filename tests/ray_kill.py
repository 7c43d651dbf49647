"""Killing a Ray worker process in the middle of a run (the Ray tests of A3C and TAAC)."""

import os
import signal


def kill_worker_0_once(trainer, ray_session, after_env_steps: int) -> dict:
    """Wraps ``trainer.agent.advance``: once the run has counted ``after_env_steps``, SIGKILLs
    the Ray process of worker 0 (recording its ``pid`` and the ``steps`` it had done), then
    records the replacement's ``new_pid`` once the pool has built it. Returns the record,
    filled as the run goes."""
    advance, seen = trainer.agent.advance, {}

    def advance_and_kill():
        source = trainer.agent.source
        if not seen and trainer.counters.env_steps >= after_env_steps:
            seen["pid"] = ray_session.get(source.handles[0].pid.remote())
            seen["steps"] = source.worker_steps[0]
            os.kill(seen["pid"], signal.SIGKILL)
        elif source.actor_restarts[0] and "new_pid" not in seen:  # the replacement, built
            seen["new_pid"] = ray_session.get(source.handles[0].pid.remote(), timeout=120)
        return advance()

    trainer.agent.advance = advance_and_kill
    return seen
