"""Actor-critic networks: torsos, LSTM core, heads and the composed model.

Choose a network by name with :class:`NetworkConfig` and build it with :func:`make_network`::

    net = make_network(NetworkConfig(core="lstm"), env.observation_space, env.action_space)
    state = net.initial_state(batch_size)
    out = net(NetInputs(obs, first, prev_action, prev_reward), state)     # one step
    out = net.unroll(NetInputs(...[T, B]...), state)                     # [T, B]
    action = net.distribution(out.policy).sample()
"""

from tfagents_vtrace.networks.actor_critic import (
    ActorCriticNetwork,
    NetInputs,
    NetOutput,
    make_network,
)
from tfagents_vtrace.networks.config import NetworkConfig
from tfagents_vtrace.networks.core import CellCore, LSTMCore, reset_where_first
from tfagents_vtrace.networks.distributions import greedy_action, make_distribution
from tfagents_vtrace.networks.heads import (
    BernoulliHead,
    CategoricalHead,
    DiscreteQHead,
    GaussianHead,
    MultiCategoricalHead,
    StochasticDuelingHead,
    ValueHead,
)
from tfagents_vtrace.networks.multi_input import MultiInputTorso
from tfagents_vtrace.networks.torsos import (
    ConvTorso,
    ImpalaResNet,
    MinAtarCNN,
    MLPTorso,
    NatureCNN,
    SmallAtariCNN,
)

__all__ = [
    "ActorCriticNetwork",
    "BernoulliHead",
    "CellCore",
    "CategoricalHead",
    "DiscreteQHead",
    "GaussianHead",
    "ImpalaResNet",
    "LSTMCore",
    "MinAtarCNN",
    "MultiCategoricalHead",
    "MultiInputTorso",
    "ConvTorso",
    "SmallAtariCNN",
    "MLPTorso",
    "NatureCNN",
    "NetInputs",
    "NetOutput",
    "NetworkConfig",
    "StochasticDuelingHead",
    "ValueHead",
    "greedy_action",
    "make_distribution",
    "make_network",
    "reset_where_first",
]
