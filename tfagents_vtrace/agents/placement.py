"""Where an agent may train: checks of the strategy and actor backend a run asks for."""

from __future__ import annotations


def require_single_replica(strategy, agent_name: str) -> None:
    """Raises ValueError unless ``strategy`` is None or has one replica: A3C, ACER and TAAC
    train on one device (A3C's parallelism is its worker threads)."""
    if strategy is not None and strategy.num_replicas_in_sync != 1:
        raise ValueError(
            f"strategy: {agent_name} trains on one replica, expected 1, received "
            f"{strategy.num_replicas_in_sync}"
        )


def require_local_backend(run, agent_name: str) -> None:
    """Raises ValueError unless ``run.backend`` is "local": agents that drive their own loop
    (A3C, ACER, TAAC) act in this process and have no Ray actors."""
    if run.backend != "local":
        raise ValueError(
            f"backend: {agent_name} acts in the training process, expected 'local', "
            f"received {run.backend!r} (--backend=ray serves IMPALA, A2C, A3C, ACER, TAAC)"
        )


def check_config(config, config_type: type) -> None:
    """Raises ValueError naming ``config`` unless it is a ``config_type``."""
    if not isinstance(config, config_type):
        raise ValueError(
            f"config: expected a {config_type.__name__}, received {type(config).__name__}"
        )


def check_local_agent(run, strategy, config, config_type: type, agent_name: str) -> None:
    """The checks of an agent that acts in the training process on one replica (A3C's
    threads, ACER, TAAC): :func:`check_config`, then :func:`require_local_backend` and
    :func:`require_single_replica`."""
    check_config(config, config_type)
    require_local_backend(run, agent_name)
    require_single_replica(strategy, agent_name)
