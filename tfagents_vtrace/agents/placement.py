"""Where an agent may train: checks of the strategy and config a run asks for."""

from __future__ import annotations


def require_single_replica(strategy, agent_name: str) -> None:
    """Raises ValueError unless ``strategy`` is None or has one replica: A3C, ACER and TAAC
    train on one device (A3C's parallelism is its worker threads)."""
    if strategy is not None and strategy.num_replicas_in_sync != 1:
        raise ValueError(
            f"strategy: {agent_name} trains on one replica, expected 1, received "
            f"{strategy.num_replicas_in_sync}"
        )


def check_config(config, config_type: type) -> None:
    """Raises ValueError naming ``config`` unless it is a ``config_type``."""
    if not isinstance(config, config_type):
        raise ValueError(
            f"config: expected a {config_type.__name__}, received {type(config).__name__}"
        )


def refuse_normalization(agent_name: str, config, network_config) -> None:
    """Raises ValueError naming the setting when ``normalize_observations`` or
    ``normalize_rewards`` is asked of an agent whose learner does not keep their statistics
    (IMPALA's and A2C's actor-learner, A3C's worker threads and ACER's do, in one process)."""
    asked = {
        "normalize_observations": getattr(network_config, "normalize_observations", False),
        "normalize_rewards": getattr(config, "normalize_rewards", False),
    }
    for name, on in asked.items():
        if on:
            raise ValueError(
                f"{name}: not available for {agent_name} (impala, a2c, and a3c and acer in one "
                "process keep its statistics)"
            )
