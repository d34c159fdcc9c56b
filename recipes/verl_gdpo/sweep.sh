#!/usr/bin/env bash
# A length-penalty sweep: one run of launch.sh per weight, each recording the sweep in its hubkit.json, so that
# `hubkit push` of each run (or PUSH_TO_PREFIX, pushing while training) puts every run's repos in one Hub
# Collection named SWEEP, each noted with its weight, final accuracy and mean answer length.
#
#   recipes/verl_gdpo/sweep.sh                                  # λ = 0 0.25 0.5 1.0, one after another
#   LAMBDAS="0 0.5" SWEEP=my-sweep recipes/verl_gdpo/sweep.sh   # other weights, another name
#   PUSH_TO_PREFIX=me/qwen3-4b-gdpo recipes/verl_gdpo/sweep.sh  # each run pushed while it trains, to
#                                                               #   me/qwen3-4b-gdpo-lambda<λ>
#   PARALLEL=1 recipes/verl_gdpo/sweep.sh                       # every run at once: on a Ray cluster whose
#                                                               #   nodes can hold them all (NNODES each)
#
# Everything else launch.sh reads from the environment applies to every run (MODEL, NNODES, ...); extra
# arguments are passed to each launch (Hydra overrides).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LAMBDAS="${LAMBDAS:-0 0.25 0.5 1.0}"
export SWEEP="${SWEEP:-deepscaler-length-penalty-$(date -u +%Y%m%d)}"
STAMP="$(date -u +%Y%m%d_%H%M%S)"

pids=()
for lambda in $LAMBDAS; do
  run_id="${STAMP}_${SWEEP}_lambda${lambda}"
  push_to="${PUSH_TO_PREFIX:+${PUSH_TO_PREFIX}-lambda${lambda//./_}}"
  if [[ -n "${PARALLEL:-}" ]]; then
    LAMBDA="$lambda" RUN_ID="$run_id" PUSH_TO="$push_to" "$HERE/launch.sh" "$@" &
    pids+=("$!")
  else
    LAMBDA="$lambda" RUN_ID="$run_id" PUSH_TO="$push_to" "$HERE/launch.sh" "$@"
  fi
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=$?
done
runs="${RUNS_DIR:-runs}"
echo "Sweep $SWEEP: $runs/${STAMP}_${SWEEP}_lambda*. Evaluate and publish every run of it:" >&2
echo "  hubkit eval --sweep \"$SWEEP\" --runs-dir \"$runs\" --problems FILE && hubkit push --sweep \"$SWEEP\" --runs-dir \"$runs\"" >&2
exit "$status"
