"""Flag definitions shared by the experiment entry points (the only place that reads FLAGS).

``define_train_flags()`` declares the experiments contract of DESIGN.md plus the IMPALA
hyperparameters and network settings; ``configs_from_flags()`` turns them into the typed
configs of the library (validation happens in the dataclasses' ``__post_init__``).
"""

from __future__ import annotations

from absl import flags

FLAGS = flags.FLAGS


def define_train_flags() -> None:
    """Declares every flag of ``experiments.train``."""
    # Experiments contract.
    flags.DEFINE_string("agent", "impala", "Agent name (tfagents_vtrace.agents registry).")
    flags.DEFINE_string("env", "CartPole-v1", "gymnasium environment id.")
    flags.DEFINE_string("logdir", None, "Run directory (resumed if it holds a checkpoint).")
    flags.DEFINE_integer("seed", 0, "Seed of environments, sampling and initialisation.")
    flags.DEFINE_integer("total_steps", 1_000_000, "Environment steps to train for.")
    flags.DEFINE_integer("num_envs", 32, "Environments per actor.")
    flags.DEFINE_enum(
        "strategy",
        "default",
        ["default", "mirrored", "multi_worker"],
        "tf.distribute strategy of the learner.",
    )
    flags.DEFINE_enum("backend", "local", ["local", "ray"], "Actors: local threads or Ray actors.")
    flags.DEFINE_string("ray_address", None, "Ray cluster to join (auto, HOST:6379); None: local.")
    flags.DEFINE_float("ray_actor_cpus", 1.0, "CPUs each Ray actor reserves (--backend=ray).")
    flags.DEFINE_integer("eval_every", 0, "Greedy evaluation every N env steps (0: at the end).")
    flags.DEFINE_integer("eval_episodes", 20, "Episodes per greedy evaluation.")
    flags.DEFINE_float("stop_return", None, "Stop at the first evaluation reaching this return.")
    # Runtime.
    flags.DEFINE_integer("num_actors", 1, "Actor threads (0: act inline in the learner thread).")
    flags.DEFINE_integer("unroll_length", 20, "Steps per unroll (T).")
    flags.DEFINE_integer("batch_unrolls", 1, "Unrolls per learner update (batch = this x envs).")
    flags.DEFINE_integer("queue_capacity", 2, "Bound of the unroll queue.")
    flags.DEFINE_string("env_mode", "auto", "make_vector_env mode: auto, sync, async, envpool.")
    flags.DEFINE_enum(
        "policy_impl",
        "auto",
        ["auto", "tf", "numpy"],
        "Acting implementation (numpy: MLP categorical policies only).",
    )
    flags.DEFINE_float("checkpoint_every_s", 600.0, "Seconds between checkpoints.")
    flags.DEFINE_float("log_every_s", 5.0, "Seconds between metrics rows.")
    flags.DEFINE_bool("export", True, "Export the policy to LOGDIR/policy at the end.")
    flags.DEFINE_bool(
        "overwrite",
        False,
        "Discard the run in --logdir (config, metrics, checkpoints, policy, events) and start "
        "afresh. Without it a directory holding files but no checkpoint, or a run of another "
        "agent, env or network, is refused.",
    )
    flags.DEFINE_integer(
        "num_cpu_devices",
        0,
        "Split the CPU into N logical devices (to test --strategy=mirrored on one CPU).",
        allow_hide_cpp=True,
    )
    # Agent hyperparameters. Each flag fills the same-named field of the chosen agent's Config
    # (ImpalaConfig, A2CConfig, A3CConfig document them); a flag not given on the command line
    # or in a flagfile leaves that agent's own default in place.
    flags.DEFINE_float("discount", 0.99, "Discount gamma.")
    flags.DEFINE_float("learning_rate", 6e-4, "Initial learning rate.")
    flags.DEFINE_enum("lr_decay", "linear", ["linear", "none"], "Learning-rate schedule.")
    flags.DEFINE_enum("optimizer", "rmsprop", ["rmsprop", "adam"], "Optimizer.")
    flags.DEFINE_float("rmsprop_decay", 0.99, "RMSProp decay.")
    flags.DEFINE_float("rmsprop_momentum", 0.0, "RMSProp momentum.")
    flags.DEFINE_float("rmsprop_epsilon", 0.1, "RMSProp epsilon.")
    flags.DEFINE_float("adam_epsilon", 1e-7, "Adam epsilon.")
    flags.DEFINE_float("max_grad_norm", 40.0, "Global-norm clipping (0: none).")
    flags.DEFINE_float("baseline_cost", 0.5, "Value-loss weight.")
    flags.DEFINE_float("entropy_cost", 0.01, "Entropy-bonus weight.")
    flags.DEFINE_float("reward_scale", 1.0, "Multiply rewards by this before clipping.")
    flags.DEFINE_enum(
        "reward_clipping", "none", ["none", "abs_one", "soft_asymmetric"], "Reward clipping."
    )
    flags.DEFINE_float("vtrace_lambda", 1.0, "V-trace lambda.")
    flags.DEFINE_bool("jit_compile", False, "XLA-compile the train step (single replica).")
    flags.DEFINE_float("adam_beta1", 0.9, "Adam beta_1.")
    flags.DEFINE_float("adam_beta2", 0.999, "Adam beta_2.")
    # IMPALA sample reuse (ImpalaConfig documents each).
    flags.DEFINE_integer("num_epochs", 1, "SGD passes over each learner batch.")
    flags.DEFINE_integer("num_minibatches", 1, "Minibatches (of whole unrolls) per epoch.")
    flags.DEFINE_enum(
        "policy_loss", "vtrace", ["vtrace", "clipped"], "V-trace PG or APPO's clipped surrogate."
    )
    flags.DEFINE_float("clip_ratio", 0.2, "Clipped-surrogate epsilon.")
    flags.DEFINE_float("kl_cost", 0.0, "Weight of KL(behaviour || learner policy).")
    flags.DEFINE_float("value_clip", None, "Value clipping range around the old values.")
    flags.DEFINE_bool("normalize_advantages", False, "Normalise advantages per minibatch.")
    flags.DEFINE_float("replay_ratio", 0.0, "Replayed unrolls per fresh unroll in a batch.")
    flags.DEFINE_integer("replay_unrolls", 0, "IMPALA: recent unrolls kept for replay (0: auto).")
    # A2C / A3C.
    flags.DEFINE_float("gae_lambda", 1.0, "GAE lambda (1.0: n-step returns).")
    flags.DEFINE_float("entropy_start", 0.01, "Entropy weight at the first update.")
    flags.DEFINE_float("entropy_end", 0.01, "Entropy weight at the end (linear anneal).")
    flags.DEFINE_integer("num_workers", 4, "A3C worker threads.")
    flags.DEFINE_integer("t_max", 20, "A3C rollout length per worker update.")
    # Network (NetworkConfig documents each).
    from tfagents_vtrace.networks.config import TORSOS

    flags.DEFINE_enum("torso", "mlp", list(TORSOS), "Network torso.")
    flags.DEFINE_list("hidden_sizes", ["64", "64"], "MLP hidden sizes.")
    flags.DEFINE_list(
        "value_hidden_sizes",
        None,
        "Hidden sizes of a separate value MLP (default: the value head shares the torso).",
    )
    flags.DEFINE_string("activation", "tanh", "MLP activation.")
    flags.DEFINE_integer("cnn_dense_size", None, "Dense layer after a conv torso (default: net's).")
    flags.DEFINE_enum("core", "none", ["none", "lstm"], "Recurrent core.")
    flags.DEFINE_integer("lstm_size", 128, "LSTM units.")
    flags.DEFINE_bool("use_prev_action", False, "Feed the previous action to the core.")
    flags.DEFINE_bool("use_prev_reward", False, "Feed the previous reward to the core.")
    flags.DEFINE_bool("use_time_step", False, "Feed the episode time step to the core.")
    # Agents with many flags of their own declare them in their own module.
    from experiments import flags_acer, flags_taac

    flags_acer.define_flags()
    flags_taac.define_flags()


def dataclass_from_flags(cls, **overrides):
    """``cls(**kwargs)`` from the flags named like ``cls``'s fields that were given.

    Flags left at their defaults are skipped, so each agent keeps its own defaults.
    """
    import dataclasses

    kwargs = {
        f.name: getattr(FLAGS, f.name)
        for f in dataclasses.fields(cls)
        if f.name in FLAGS and FLAGS[f.name].present
    }
    kwargs.update(overrides)
    return cls(**kwargs)


def configs_from_flags():
    """``(agent_module, agent_config, network_config, run_config)`` built from FLAGS."""
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.config import RunConfig

    agent = get_agent(FLAGS.agent)
    agent_config = dataclass_from_flags(agent.Config)
    network_config = NetworkConfig(
        torso=FLAGS.torso,
        hidden_sizes=tuple(int(h) for h in FLAGS.hidden_sizes),
        value_hidden_sizes=(
            None if FLAGS.value_hidden_sizes is None else tuple(map(int, FLAGS.value_hidden_sizes))
        ),
        activation=FLAGS.activation,
        cnn_dense_size=FLAGS.cnn_dense_size,
        core=None if FLAGS.core == "none" else FLAGS.core,
        lstm_size=FLAGS.lstm_size,
        use_prev_action=FLAGS.use_prev_action,
        use_prev_reward=FLAGS.use_prev_reward,
        use_time_step=FLAGS.use_time_step,
    )
    if hasattr(agent, "network_config_for"):  # e.g. ACER adds its Q head
        network_config = agent.network_config_for(network_config, agent_config, FLAGS.env)
    run_config = RunConfig(
        env_id=FLAGS.env,
        seed=FLAGS.seed,
        total_steps=FLAGS.total_steps,
        num_actors=FLAGS.num_actors,
        num_envs=FLAGS.num_envs,
        unroll_length=FLAGS.unroll_length,
        batch_unrolls=FLAGS.batch_unrolls,
        queue_capacity=FLAGS.queue_capacity,
        env_mode=FLAGS.env_mode,
        policy_impl=FLAGS.policy_impl,
        eval_every=FLAGS.eval_every,
        eval_episodes=FLAGS.eval_episodes,
        stop_return=FLAGS.stop_return,
        checkpoint_every_s=FLAGS.checkpoint_every_s,
        log_every_s=FLAGS.log_every_s,
        backend=FLAGS.backend,
        ray_address=FLAGS.ray_address,
        ray_actor_cpus=FLAGS.ray_actor_cpus,
        export_policy=FLAGS.export,
    )
    return agent, agent_config, network_config, run_config
