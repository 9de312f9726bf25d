#!/usr/bin/env bash
# Installs vLLM 0.33.0's v1 scheduler, pinned, with torch 2.13.0 (CPU build) and this project, into the
# virtual environment VENV (created if absent), apart from the main suite's venv, which stays light.
#
#   examples/engines/install-vllm.sh VENV            # vLLM (docs/engines.md, "vLLM 0.33.0")
#   examples/engines/install-vllm.sh VENV --sglang   # and SGLang 0.5.23 beside it (docs/engines.md, "SGLang")
#
# Then run the vLLM adapter with VENV's python (the sandbox's children are that interpreter):
#   VENV/bin/schedcheck verify --model serving --online examples/engines/vllm_v1.py:make --policy none
# The adapter sets VLLM_TARGET_DEVICE=cpu and HF_HUB_OFFLINE=1 itself unless they are set.
#
# Every step fails the script (set -e): a CUDA build of torch that pip would resolve, a missing pin, an import
# of the scheduler that fails. Nothing is downloaded but wheels from the package index: no weights, no hub.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:?usage: examples/engines/install-vllm.sh VENV [--sglang]}"
sglang="${2:-}"
case "$sglang" in ""|--sglang) ;; *) echo "install-vllm.sh: unknown option $sglang (expected --sglang)" >&2; exit 2 ;; esac
pins="$here/requirements-vllm.txt"
TORCH=2.13.0
VLLM=0.33.0
SGLANG=0.5.23

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
# pip's notes about this machine's local index folders are noise: dropped, every other line kept
pip() { "$py" -m pip --disable-pip-version-check "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); }

# 1. torch, pinned, and checked before anything is downloaded: pip must resolve the CPU build (on this
#    machine kind it lies on the disk) and no nvidia-* package. Its own dependencies are constrained by the pins.
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
pip install -q --dry-run --ignore-installed --report "$report" "torch==$TORCH" -c "$pins"
"$py" - "$report" "$TORCH" <<'PY'
import json, sys
report, torch = sys.argv[1], sys.argv[2]
chosen = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in json.load(open(report))["install"]}
cuda = sorted(name for name in chosen if name.startswith(("nvidia-", "triton")))
if chosen.get("torch") != f"{torch}+cpu" or cuda:
    sys.exit(f"install-vllm.sh: pip would install torch {chosen.get('torch')} with {cuda or 'no CUDA package'}; "
             f"expected torch {torch}+cpu and no CUDA package: refusing (see docs/engines.md)")
PY
pip install -q "torch==$TORCH" -c "$pins"

# 2. vLLM without what it declares, then the pinned packages its scheduler's imports need (--no-deps: exactly these).
pip install -q --no-deps "vllm==$VLLM"
pip install -q --no-deps -r "$pins"
if [ "$sglang" = --sglang ]; then
    pip install -q --no-deps "sglang==$SGLANG"
    pip install -q --no-deps -r "$here/requirements-sglang.txt"
fi

# 3. this project (editable), its own dependencies resolved normally but held to the pins above.
pip install -q -e "$root" -c "$pins"

# 4. the check: the scheduler imports, and torch is still the CPU build.
VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 "$py" - "$TORCH" "$VLLM" <<'PY'
import sys
import torch
import vllm
import vllm.v1.core.sched.scheduler  # noqa: F401  (the module the adapter drives)
if torch.__version__ != f"{sys.argv[1]}+cpu" or vllm.__version__ != sys.argv[2]:
    sys.exit(f"install-vllm.sh: found torch {torch.__version__}, vllm {vllm.__version__}")
print(f"install-vllm.sh: torch {torch.__version__}, vllm {vllm.__version__}: vllm.v1.core.sched.scheduler imports")
PY
if [ "$sglang" = --sglang ]; then
    # its scheduling modules import (torchvision stubbed: docs/engines.md) and one seeded workload runs
    "$py" -W ignore "$here/sglang_kv.py" 1 5
fi
