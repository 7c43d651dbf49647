#!/usr/bin/env bash
# Train IMPALA on your own environment from the command line, evaluate and export it.
# `--env=my_envs:Corridor-v0` imports my_envs (it registers Corridor-v0) because you named it.
set -euo pipefail
cd "$(dirname "$0")"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
LOGDIR=${LOGDIR:-runs/corridor_cli}
tfv-train --agent=impala --env=my_envs:Corridor-v0 --logdir="$LOGDIR" \
  --total_steps="${TOTAL_STEPS:-100000}"
tfv-evaluate --policy="$LOGDIR/policy" --env=my_envs:Corridor-v0 --episodes=10
tfv-export --logdir="$LOGDIR" --env=my_envs:Corridor-v0 --format=onnx --output="$LOGDIR/policy.onnx"
