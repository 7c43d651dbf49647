"""Killing a training subprocess in the middle of its run (the resume-after-a-kill tests)."""

import glob
import os
import signal
import time


def kill_after_a_checkpoint(proc, logdir: str, timeout_s: float = 300.0) -> int:
    """Waits until ``proc``, a training into ``logdir``, has written a checkpoint after its
    step-0 one and a metrics row (rows come every ``log_every_s``), lets it run 0.5 s more,
    SIGKILLs it; returns the step of its newest checkpoint."""
    pattern = os.path.join(logdir, "checkpoints", "ckpt-*.index")
    rows = os.path.join(logdir, "metrics.jsonl")
    try:
        deadline = time.time() + timeout_s
        while True:
            waiting = [what for what, done in (
                ("a checkpoint after the step-0 one", len(glob.glob(pattern)) >= 2),
                ("the first metrics row", os.path.exists(rows)),
            ) if not done]  # fmt: skip
            if not waiting:
                break
            what = " and ".join(waiting)
            assert proc.poll() is None, f"the run ended (exit code {proc.returncode}) before {what}"
            assert time.time() < deadline, f"timed out after {timeout_s} s waiting for {what}"
            time.sleep(0.1)
        time.sleep(0.5)  # let it run past the checkpoint
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return max(int(os.path.basename(p)[len("ckpt-") : -len(".index")]) for p in glob.glob(pattern))
