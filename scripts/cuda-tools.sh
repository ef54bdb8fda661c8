#!/usr/bin/env bash
# Installs NVRTC and ptxas (CUDA 12.9, the version of tensor-runtime's cudarc feature
# `cuda-12090`) from PyPI wheels into `.cuda-venv/` at the repository root, then prints the
# environment that the CUDA checks read. No GPU or driver is needed.
#
#   eval "$(scripts/cuda-tools.sh)"      # install (once) and export the variables
#
# Exports (the runtime finds the tools only through these, the library path and PATH; it
# does not look for `.cuda-venv/` itself, since a folder found by searching could belong to
# another user):
#   TENSOR_NVRTC      the libnvrtc.so.12 the runtime loads before cudarc asks for NVRTC
#   LD_LIBRARY_PATH   gains the folder of libnvrtc.so.12 (cudarc loads NVRTC by name from it)
#   TENSOR_PTXAS      the ptxas binary that assembles PTX for a given sm_XX
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.cuda-venv"
version="12.9.*"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/pip" ]; then
  "$python" -m venv "$venv" >&2
fi
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
nvrtc_lib="$site/nvidia/cuda_nvrtc/lib"
ptxas="$site/nvidia/cuda_nvcc/bin/ptxas"
if [ ! -e "$nvrtc_lib/libnvrtc.so.12" ] || [ ! -x "$ptxas" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "nvidia-cuda-nvrtc-cu12==$version" "nvidia-cuda-nvcc-cu12==$version" >&2
fi
[ -e "$nvrtc_lib/libnvrtc.so.12" ] || { echo "cuda-tools: $nvrtc_lib/libnvrtc.so.12 missing after install" >&2; exit 1; }
[ -x "$ptxas" ] || { echo "cuda-tools: $ptxas missing after install" >&2; exit 1; }
# cudarc looks for libnvrtc.so before libnvrtc.so.12: without this link, a system CUDA 13
# toolkit's libnvrtc.so (which lacks functions the CUDA 12 bindings need) would be found first.
ln -sf libnvrtc.so.12 "$nvrtc_lib/libnvrtc.so"
echo "export LD_LIBRARY_PATH=\"$nvrtc_lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
echo "export TENSOR_NVRTC=\"$nvrtc_lib/libnvrtc.so.12\""
echo "export TENSOR_PTXAS=\"$ptxas\""
