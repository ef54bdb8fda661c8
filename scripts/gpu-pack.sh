#!/usr/bin/env bash
# Builds the release test binaries and the GPU examples of a commit here, and packs them with
# NVRTC 12.9 into `.gpu/` (ignored by git) for a machine that has a GPU but no Rust toolchain.
# There, `scripts/gpu-run-packed.sh` runs every test binary with DEVICE=CUDA and the GPU
# examples. The binaries embed the source paths of the build, so the build happens in a
# worktree at a fixed path (`/work/gpu-src`) that the runner recreates as a link.
#
#   scripts/gpu-pack.sh [commit]        # default HEAD; about 9 minutes on 2 cores
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
commit="${1:-HEAD}"
src=/work/gpu-src
target="${GPU_TARGET:-/work/gpu-target}"
eval "$("$root/scripts/cuda-tools.sh")"
nvrtc_dir="$(dirname "$TENSOR_NVRTC")"
git -C "$root" worktree remove --force "$src" 2>/dev/null || rm -rf "$src"
git -C "$root" worktree add --force --detach "$src" "$commit" >&2
(cd "$src" && CARGO_TARGET_DIR="$target" cargo test --workspace --release --no-run \
  --features nccl --message-format=json >"$target/tests.json")
pack="$root/.gpu"
rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/nvrtc"
# One line per test binary: the binary and the package folder cargo runs it in.
python3 - "$target/tests.json" "$src" >"$pack/bin/MANIFEST" <<'PY'
import json, os, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        kind = m["target"]["kind"][0]
        if kind == "proc-macro" or m["target"]["name"] == "ui":  # need rustc at run time
            continue
        pkg = os.path.relpath(os.path.dirname(m["manifest_path"]), sys.argv[2])
        print(os.path.basename(m["executable"]), pkg)
PY
while read -r exe _; do cp "$target/release/deps/$exe" "$pack/bin/"; done <"$pack/bin/MANIFEST"
for ex in gpu_bench training_loop per_sample_grads_cnn; do cp "$target/release/examples/$ex" "$pack/bin/"; done
strip "$pack"/bin/* 2>/dev/null || true
cp "$nvrtc_dir/libnvrtc.so.12" "$nvrtc_dir"/libnvrtc-builtins.so.12.* "$pack/nvrtc/"
(cd "$pack" && tar cf - bin | xz -9 -T0 >bins.tar.xz && tar cf - nvrtc | xz -9 -T0 >nvrtc.tar.xz && rm -rf bin nvrtc)
du -sh "$pack"/*.tar.xz >&2
