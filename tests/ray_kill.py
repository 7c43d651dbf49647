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


def kill_process_0(trainer, ray_session, after_env_steps: int, times: int, pool=None) -> dict:
    """Wraps ``trainer.agent.advance``: once the run has counted ``after_env_steps``, SIGKILLs
    the Ray process of actor / worker 0, then each replacement once it is built, ``times``
    processes in all. ``pool(trainer)`` gives the :class:`RayProcesses` (default: the
    agent's ``source``, A3C's workers; IMPALA's is ``source.threads[0]``). Returns the record:
    ``pids`` killed and the run's ``steps`` at each kill."""
    pool = pool or (lambda trainer: trainer.agent.source)
    advance, seen = trainer.agent.advance, {"pids": [], "steps": []}

    def advance_and_kill():
        processes, killed = pool(trainer), seen["pids"]
        due = killed or trainer.counters.env_steps >= after_env_steps
        if due and len(killed) < times and processes.actor_restarts[0] == len(killed):
            try:  # the current process of id 0 (a replacement once it is built)
                pid = ray_session.get(processes.handles[0].pid.remote(), timeout=120)
            except ray_session.exceptions.RayActorError:  # the handle of the one killed
                pid = None
            if pid is not None and pid not in killed:
                killed.append(pid)
                seen["steps"].append(trainer.counters.env_steps)
                os.kill(pid, signal.SIGKILL)
        return advance()

    trainer.agent.advance = advance_and_kill
    return seen
