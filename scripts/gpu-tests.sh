#!/usr/bin/env bash
# Runs the whole test suite on a GPU: every realize of every test computes on CUDA:0
# (DEVICE=CUDA), against the same interpreter, JAX and PyTorch references as on the CPU, plus
# tests/cuda_device.rs, which selects the GPU itself. Needs an NVIDIA driver; NVRTC 12.9 comes
# from PyPI as in CI (scripts/cuda-tools.sh). Extra arguments go to `cargo test`.
#
#   scripts/gpu-tests.sh            # then: cargo run --release --example gpu_bench
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/cuda-tools.sh)"
export PROPTEST_CASES="${PROPTEST_CASES:-64}"
DEVICE=CUDA cargo test --workspace --release "$@"
