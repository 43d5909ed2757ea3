#!/usr/bin/env bash
# For whoever has a GPU: the GPU-marked tests and the GPU benchmarks, in one command.
#
#     bash scripts/gpu_check.sh [OUTPUT_DIR]      # JSONs go to OUTPUT_DIR (default benchmarks/gpu)
#
# Runs from the project root in the current Python environment (pip install -e ".[dev]").
# The tests train under mixed_float16 and mixed_bfloat16 and under MirroredStrategy over
# every visible GPU; the benchmarks compare our Transformer with keras-hub's in training
# (float32 and mixed_float16), each --precision with and without XLA, our attention layer
# with Keras' at long lengths, when XLA repays its compiling in training, and the two
# placements of length buckets in a training epoch (these two read Multi30k from
# $KERAS_ATTENTION_DATA).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-benchmarks/gpu}"
mkdir -p "$out"
python - <<'PY'
import sys
import tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
print("GPUs:", [g.name for g in gpus])
sys.exit(0 if gpus else "gpu_check.sh: TensorFlow sees no GPU")
PY
python -m pytest -q -m gpu tests/gpu
python -u scripts/benchmark_training.py --batch-size 256 --rounds 10 --json "$out/training_float32.json"
python -u scripts/benchmark_training.py --batch-size 256 --rounds 10 --precision mixed_float16 \
    --json "$out/training_mixed_float16.json"
python -u scripts/benchmark_precision.py --variants float32:xla float32:no-xla mixed_float16:xla \
    mixed_float16:no-xla mixed_bfloat16:xla --json "$out/precision.json"
python -u scripts/benchmark_attention.py --batch 32 --lengths 512 1024 2048 4096 --json "$out/attention.json"
python -u scripts/benchmark_xla_break_even.py --json "$out/xla_break_even.json"
python -u scripts/benchmark_buckets.py --json "$out/buckets.json"
echo "gpu_check.sh: JSONs in $out"
