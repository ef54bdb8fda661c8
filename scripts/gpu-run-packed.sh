#!/usr/bin/env bash
# Runs what `scripts/gpu-pack.sh` packed into `.gpu/`, on a machine with an NVIDIA GPU and no
# Rust toolchain: every test binary with DEVICE=CUDA (in its package folder, as cargo would),
# then the GPU examples. Logs and a summary go to $OUT (else ./gpu-out).
#
#   scripts/gpu-run-packed.sh [seconds per test binary, default 200]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$root/gpu-out}"
budget="${1:-200}"
mkdir -p "$out/logs" /work
ln -sfn "$root" /work/gpu-src   # the binaries' embedded source paths
cd "$root/.gpu" && tar xJf bins.tar.xz && tar xJf nvrtc.tar.xz && cd "$root"
ln -sf libnvrtc.so.12 .gpu/nvrtc/libnvrtc.so
export LD_LIBRARY_PATH="$root/.gpu/nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TENSOR_NVRTC="$root/.gpu/nvrtc/libnvrtc.so.12"
# NCCL for tests/dist_nccl.rs: the system's, else the one PyTorch's wheels bring.
nccl="$(ldconfig -p 2>/dev/null | grep -o '/.*libnccl.so.2' | head -1)"
[ -n "$nccl" ] || nccl="$(find / -name libnccl.so.2 -not -path '*/proc/*' 2>/dev/null | head -1)"
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname "$nccl"):$LD_LIBRARY_PATH"
echo "NCCL: ${nccl:-not found}" >"$out/nccl.txt"
export TENSOR_CACHE_DIR=/tmp/tensor-cache PROPTEST_CASES="${PROPTEST_CASES:-64}" DEVICE=CUDA
nvidia-smi -L | tee "$out/summary.txt"
run_one() {
  local exe="$1" pkg="$2" start=$SECONDS
  (cd "$root/$pkg" && timeout "$budget" "$root/.gpu/bin/$exe" --test-threads=4 >"$out/logs/$exe.log" 2>&1)
  local rc=$?
  echo "$exe rc=$rc $((SECONDS - start))s $(grep -h '^test result' "$out/logs/$exe.log" | tr '\n' ' ')"
}
export -f run_one
export root out budget
timeout 300 xargs -P 6 -L 1 bash -c 'run_one "$0" "$1"' <.gpu/bin/MANIFEST | sort >>"$out/summary.txt"
echo "binaries run: $(grep -c 'rc=' "$out/summary.txt"), failed: $(grep 'rc=' "$out/summary.txt" | grep -vc 'rc=0 ')" >>"$out/summary.txt"
grep -h -A30 -- '---- .* stdout ----' "$out"/logs/*.log | head -300 >"$out/failures.txt"
# tensor::dist over NCCL, its output shown: a world of one on GPU 0 runs every collective.
for exe in $(awk '$1 ~ /^dist_nccl-/ {print $1}' .gpu/bin/MANIFEST); do
  timeout 60 ".gpu/bin/$exe" --nocapture >>"$out/nccl.txt" 2>&1
  echo "rc=$?" >>"$out/nccl.txt"
done
for ex in gpu_bench training_loop; do
  echo "== $ex" >>"$out/examples.txt"
  timeout 75 ".gpu/bin/$ex" >>"$out/examples.txt" 2>&1
  echo "rc=$?" >>"$out/examples.txt"
done
(cd "$out" && tar czf logs.tar.gz logs && rm -rf logs)
cat "$out/summary.txt"
