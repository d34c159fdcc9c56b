#!/usr/bin/env bash
# DeepScaleR length-penalty GRPO/GDPO run on verl 0.6.1 (FSDP2 + vLLM rollouts, LoRA), the seed run's settings.
#
#   recipes/verl_gdpo/launch.sh                       # train; writes runs/<run_id>/ for `hubkit push`
#   recipes/verl_gdpo/launch.sh --print-overrides     # print the Hydra overrides, one per line, and exit
#   recipes/verl_gdpo/launch.sh --preflight           # write the manifest and check everything verl checks
#                                                     #   before its GPU workers start (no GPU needed)
#   recipes/verl_gdpo/launch.sh trainer.val_before_train=True   # extra Hydra overrides go last and win
#
# Every setting below can be overridden from the environment, e.g. `LAMBDA=0.2 NNODES=2 recipes/verl_gdpo/launch.sh`.
# Several nodes: start a Ray cluster first (README.md), then run this on the head node with NNODES set.
set -euo pipefail

MODE=train
case "${1:-}" in
  --print-overrides) MODE=print; shift ;;
  --preflight) MODE=preflight; shift ;;
esac
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"

# --- what is trained ----------------------------------------------------------------------------------------
MODEL="${MODEL:-Qwen/Qwen3-4B}"                              # a Hub id or a local copy of it
BASE_MODEL_ID="${BASE_MODEL_ID:-$MODEL}"                     # the Hub id the manifest records (never a path)
DATA_DIR="${DATA_DIR:-data/deepscaler_easy}"                # written by prepare_data.py
TRAIN_FILE="${TRAIN_FILE:-$DATA_DIR/train.parquet}"
VAL_FILE="${VAL_FILE:-$TRAIN_FILE}"                          # validation is off unless TEST_FREQ > 0
# --- reward: correctness + LAMBDA * (-tokens / MAX_COMPLETION_LENGTH) -----------------------------------------
LAMBDA="${LAMBDA:-0.5}"
AGGREGATION="${AGGREGATION:-sum_then_normalize}"             # or normalize_then_sum (GDPO)
REWARD_WORKERS="${REWARD_WORKERS:-4}"                        # math-verify processes
# --- LoRA ---------------------------------------------------------------------------------------------------
LORA_RANK="${LORA_RANK:-16}"
LORA_ALPHA="${LORA_ALPHA:-16}"
# The seed's seven modules: "all-linear" is PEFT's every Linear layer but the output head, which in Qwen3 is
# exactly q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj and down_proj in every layer. verl 0.6.1 types
# this setting as one string (HFModelConfig.target_modules): a list stops every worker at start-up.
TARGET_MODULES="${TARGET_MODULES:-all-linear}"
# --- optimisation -------------------------------------------------------------------------------------------
LR="${LR:-5e-5}"
LR_SCHEDULER="${LR_SCHEDULER:-constant}"
KL_COEF="${KL_COEF:-0.0}"                                    # 0 = no KL term and no reference pass
WEIGHT_DECAY="${WEIGHT_DECAY:-0.1}"
ADAM_BETAS="${ADAM_BETAS:-[0.9,0.99]}"
MAX_GRAD_NORM="${MAX_GRAD_NORM:-1.0}"
PPO_EPOCHS="${PPO_EPOCHS:-1}"
CLIP_RATIO="${CLIP_RATIO:-0.2}"
# --- sampling and batch -------------------------------------------------------------------------------------
TEMPERATURE="${TEMPERATURE:-1.0}"
TOP_P="${TOP_P:-0.95}"
PROMPTS_PER_STEP="${PROMPTS_PER_STEP:-6}"
ROLLOUTS_PER_PROMPT="${ROLLOUTS_PER_PROMPT:-8}"              # 6 x 8 = 48 completions per step
MAX_PROMPT_LENGTH="${MAX_PROMPT_LENGTH:-1024}"
MAX_COMPLETION_LENGTH="${MAX_COMPLETION_LENGTH:-15000}"
# vLLM 0.6.1 refuses chunked prefill when this is below prompt + response length (research: verl §0.10).
SEQ_LEN=$((MAX_PROMPT_LENGTH + MAX_COMPLETION_LENGTH))
MAX_NUM_BATCHED_TOKENS="${MAX_NUM_BATCHED_TOKENS:-$((SEQ_LEN > 16384 ? SEQ_LEN : 16384))}"
PPO_MAX_TOKEN_LEN_PER_GPU="${PPO_MAX_TOKEN_LEN_PER_GPU:-$((2 * MAX_NUM_BATCHED_TOKENS))}"
GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-0.6}"
# --- schedule -----------------------------------------------------------------------------------------------
TOTAL_STEPS="${TOTAL_STEPS:-200}"
SAVE_EVERY="${SAVE_EVERY:-20}"
TEST_FREQ="${TEST_FREQ:--1}"
# --- hardware -----------------------------------------------------------------------------------------------
N_GPUS_PER_NODE="${N_GPUS_PER_NODE:-4}"
NNODES="${NNODES:-1}"
# --- where the run goes -------------------------------------------------------------------------------------
# ACCELERATOR: the GPU name for the manifest when this node has none (default: what torch reports here).
RUNS_DIR="${RUNS_DIR:-runs}"
RUN_ID="${RUN_ID:-$(date -u +%Y%m%d_%H%M%S)_deepscaler_gdpo_lambda${LAMBDA}}"
case "$RUNS_DIR" in /*) RUN_DIR="$RUNS_DIR/$RUN_ID" ;; *) RUN_DIR="$PWD/$RUNS_DIR/$RUN_ID" ;; esac
DATASET_INFO="${DATASET_INFO:-$(dirname "$TRAIN_FILE")/dataset_info.json}"

case "$AGGREGATION" in
  sum_then_normalize | normalize_then_sum) ;;
  *) echo "Error: AGGREGATION must be sum_then_normalize or normalize_then_sum, got '$AGGREGATION'" >&2; exit 1 ;;
esac
if [[ "$KL_COEF" =~ ^0*\.?0*$ ]]; then USE_KL=False; else USE_KL=True; fi

# The reward file lives in the installed hubkit package; verl execs it, which registers the reward manager
# and the advantage estimator, both named "hubkit".
if [[ -z "${REWARD_FILE:-}" ]]; then
  if ! REWARD_FILE="$("$PYTHON" -c 'import importlib.util; print(importlib.util.find_spec("hubkit.integrations.verl_reward").origin)')"; then
    echo "Error: hubkit is not importable by $PYTHON: install it into verl's environment (make venv-verl) or set PYTHON" >&2
    exit 1
  fi
fi

OVERRIDES=(
  "algorithm.adv_estimator=hubkit"
  "algorithm.use_kl_in_reward=False"
  "algorithm.kl_ctrl.kl_coef=$KL_COEF"
  "data.train_files=$TRAIN_FILE"
  "data.val_files=$VAL_FILE"
  "data.train_batch_size=$PROMPTS_PER_STEP"
  "data.max_prompt_length=$MAX_PROMPT_LENGTH"
  "data.max_response_length=$MAX_COMPLETION_LENGTH"
  "data.filter_overlong_prompts=True"
  "data.truncation=error"
  "actor_rollout_ref.model.path=$MODEL"
  "actor_rollout_ref.model.lora_rank=$LORA_RANK"
  "actor_rollout_ref.model.lora_alpha=$LORA_ALPHA"
  "actor_rollout_ref.model.target_modules=$TARGET_MODULES"
  "actor_rollout_ref.model.use_remove_padding=True"
  "actor_rollout_ref.model.enable_gradient_checkpointing=True"
  "actor_rollout_ref.actor.strategy=fsdp2"
  "actor_rollout_ref.actor.optim.optimizer=AdamW"
  "actor_rollout_ref.actor.optim.lr=$LR"
  "actor_rollout_ref.actor.optim.lr_scheduler_type=$LR_SCHEDULER"
  "actor_rollout_ref.actor.optim.lr_warmup_steps=0"
  "actor_rollout_ref.actor.optim.weight_decay=$WEIGHT_DECAY"
  "actor_rollout_ref.actor.optim.betas=$ADAM_BETAS"
  "actor_rollout_ref.actor.optim.clip_grad=$MAX_GRAD_NORM"
  "actor_rollout_ref.actor.grad_clip=$MAX_GRAD_NORM"
  "actor_rollout_ref.actor.ppo_epochs=$PPO_EPOCHS"
  "actor_rollout_ref.actor.ppo_mini_batch_size=$PROMPTS_PER_STEP"
  "actor_rollout_ref.actor.use_dynamic_bsz=True"
  "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$PPO_MAX_TOKEN_LEN_PER_GPU"
  "actor_rollout_ref.actor.clip_ratio=$CLIP_RATIO"
  "actor_rollout_ref.actor.clip_ratio_low=$CLIP_RATIO"
  "actor_rollout_ref.actor.clip_ratio_high=$CLIP_RATIO"
  "actor_rollout_ref.actor.use_kl_loss=$USE_KL"
  "actor_rollout_ref.actor.kl_loss_coef=$KL_COEF"
  "actor_rollout_ref.actor.entropy_coeff=0"
  "actor_rollout_ref.actor.loss_agg_mode=token-mean"
  "actor_rollout_ref.rollout.name=vllm"
  "actor_rollout_ref.rollout.mode=sync"
  "actor_rollout_ref.rollout.n=$ROLLOUTS_PER_PROMPT"
  "actor_rollout_ref.rollout.temperature=$TEMPERATURE"
  "actor_rollout_ref.rollout.top_p=$TOP_P"
  "actor_rollout_ref.rollout.tensor_model_parallel_size=1"
  "actor_rollout_ref.rollout.gpu_memory_utilization=$GPU_MEMORY_UTILIZATION"
  "actor_rollout_ref.rollout.max_num_batched_tokens=$MAX_NUM_BATCHED_TOKENS"
  # LoRA: vLLM loads the base weights itself and only the LoRA deltas are synced.
  "actor_rollout_ref.rollout.load_format=safetensors"
  # layered_summon gathers an empty LoRA with PEFT >= 0.21 (vLLM would sample the base model): keep it off.
  "actor_rollout_ref.rollout.layered_summon=False"
  "actor_rollout_ref.rollout.val_kwargs.do_sample=True"
  "actor_rollout_ref.rollout.val_kwargs.temperature=$TEMPERATURE"
  "actor_rollout_ref.rollout.val_kwargs.top_p=$TOP_P"
  "custom_reward_function.path=$REWARD_FILE"
  "reward_model.reward_manager=hubkit"
  # The reward manager reads the reward spec (components, lambda, aggregation) from the run's manifest.
  "+reward_model.reward_kwargs.spec_file=$RUN_DIR/hubkit.json"
  "+reward_model.reward_kwargs.num_workers=$REWARD_WORKERS"
  "trainer.total_training_steps=$TOTAL_STEPS"
  "trainer.total_epochs=1000"
  "trainer.save_freq=$SAVE_EVERY"
  "trainer.test_freq=$TEST_FREQ"
  "trainer.val_before_train=False"
  "trainer.critic_warmup=0"
  "trainer.n_gpus_per_node=$N_GPUS_PER_NODE"
  "trainer.nnodes=$NNODES"
  "trainer.logger=[console,file]"
  "trainer.project_name=hubkit"
  "trainer.experiment_name=$RUN_ID"
  # Checkpoints land in the run directory itself: global_step_N/actor/..., as `hubkit push` reads them.
  "trainer.default_local_dir=$RUN_DIR"
  # verl's dump of each step's rollouts (<step>.jsonl): `hubkit push` publishes the first 64 of each step
  # in the <repo>-samples dataset (config "rollouts").
  "trainer.rollout_data_dir=$RUN_DIR/rollouts"
  # The file logger runs inside a Ray actor, possibly on another node: hand it the path through Ray.
  "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH=$RUN_DIR/metrics.jsonl"
  "$@"
)
if [[ "$MODE" == print ]]; then
  printf '%s\n' "${OVERRIDES[@]}"
  exit 0
fi

# verl 0.6.1 resumes from the checkpoints it finds there, but its file logger truncates metrics.jsonl:
# a second launch into a trained run directory would silently lose the earlier metrics.
if [[ "$MODE" == train && -e "$RUN_DIR/latest_checkpointed_iteration.txt" ]]; then
  echo "Error: $RUN_DIR already holds checkpoints: choose a new RUN_ID (resuming would truncate its metrics.jsonl)" >&2
  exit 1
fi
mkdir -p "$RUN_DIR"
# verl's file logger writes {"step": N, "data": {...}} lines here; the manifest names it as metrics_file.
export VERL_FILE_LOGGER_PATH="$RUN_DIR/metrics.jsonl"
"$PYTHON" "$HERE/write_manifest.py" start --run-dir "$RUN_DIR" --dataset-info "$DATASET_INFO" \
  --base-model "$BASE_MODEL_ID" --lambda "$LAMBDA" --aggregation "$AGGREGATION" \
  ${ACCELERATOR:+--accelerator "$ACCELERATOR"} ${PUSH_TO:+--push-to "$PUSH_TO"} ${SWEEP:+--sweep "$SWEEP"} \
  -- "${OVERRIDES[@]}"
if [[ "$MODE" == preflight ]]; then
  "$PYTHON" "$HERE/preflight.py" --tokenizer "${TOKENIZER:-$MODEL}" -- "${OVERRIDES[@]}"
  echo "Preflight passed. $RUN_DIR holds the manifest; launch with RUN_ID=$RUN_ID to train into it." >&2
  exit 0
fi
# With PUSH_TO=owner/name, `hubkit push --watch` runs beside the trainer and publishes each checkpoint
# as verl completes it (the repo is recorded in hubkit.json). verl's environment holds only hubkit's
# core, so the watcher is the hubkit of a publishing environment: HUBKIT (default: `hubkit` on PATH).
WATCHER=
if [[ -n "${PUSH_TO:-}" ]]; then
  "${HUBKIT:-hubkit}" push --run-dir "$RUN_DIR" --watch --watch-interval "${PUSH_INTERVAL:-60}" &
  WATCHER=$!
  # Whatever ends this script (a failed launch, Ctrl-C), the watcher stops with it. SIGTERM: a background
  # job of a script ignores SIGINT.
  trap 'if [[ -n "$WATCHER" ]]; then kill -TERM "$WATCHER" 2>/dev/null; wait "$WATCHER" 2>/dev/null || true; fi' EXIT
fi
status=0
"$PYTHON" -m verl.trainer.main_ppo "${OVERRIDES[@]}" || status=$?
if [[ $status -ne 0 ]]; then
  echo "Error: training failed (exit $status)${WATCHER:+; stopping the push watcher (the checkpoints pushed so far stay)}" >&2
  exit "$status"
fi
"$PYTHON" "$HERE/write_manifest.py" finish --run-dir "$RUN_DIR"
echo "Run finished: $RUN_DIR"
if [[ -n "$WATCHER" ]]; then
  # The watcher sees the finished run, pushes the last step and the merged model, and exits.
  watcher_status=0
  wait "$WATCHER" || watcher_status=$?
  WATCHER=
  if [[ $watcher_status -ne 0 ]]; then
    echo "Error: the push watcher failed (exit $watcher_status): run \`hubkit push --run-id $RUN_ID\` to finish publishing" >&2
    exit "$watcher_status"
  fi
  echo "Pushed to $PUSH_TO"
else
  echo "Publish it with: hubkit push --run-id $RUN_ID"
fi
