#!/usr/bin/env bash
# Real agent clients for crates/ctxpress-cli/tests/it/real_clients.rs: Claude
# Code (npm @anthropic-ai/claude-code) and opencode (npm opencode-ai), pinned.
#
#   scripts/real-clients.sh install   # idempotent: npm install --prefix into the cache, then
#                                     # links $CACHE/clients/bin/{claude,opencode}
#   scripts/real-clients.sh status    # exit 0 when both answer --version
#
# Both packages ship a native binary (an optional dependency per platform):
# Node and npm are needed to install them, not to run them.
# Everything lives under ${CTXPRESS_CACHE:-$HOME/.cache/ctxpress}/clients; the
# test finds the binaries in its bin/ (or at $CTXPRESS_CLAUDE_BIN and
# $CTXPRESS_OPENCODE_BIN).
set -euo pipefail

CLAUDE_CODE_VERSION="${CTXPRESS_CLAUDE_CODE_VERSION:-2.1.332}"
OPENCODE_VERSION="${CTXPRESS_OPENCODE_VERSION:-1.18.33}"
DIR="${CTXPRESS_CACHE:-$HOME/.cache/ctxpress}/clients"

log() { echo "real-clients: $*" >&2; }

# install NAME PACKAGE VERSION BIN: DIR/NAME-VERSION, linked as DIR/bin/BIN.
install_one() {
  local name="$1" pkg="$2" version="$3" bin="$4"
  local prefix="$DIR/$name-$version"
  local exe="$prefix/node_modules/.bin/$bin"
  if ! { [ -x "$exe" ] && "$exe" --version 2>/dev/null | grep -qF "$version"; }; then
    command -v npm >/dev/null 2>&1 || { log "npm not found: cannot install $pkg"; return 1; }
    log "installing $pkg@$version into $prefix"
    rm -rf "$prefix"
    mkdir -p "$prefix"
    # The package's postinstall puts the platform's native binary in place.
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$pkg@$version" >&2 \
      || { rm -rf "$prefix"; log "npm install $pkg@$version failed"; return 1; }
    "$exe" --version 2>/dev/null | grep -qF "$version" \
      || { log "$exe does not answer --version with $version"; return 1; }
  fi
  mkdir -p "$DIR/bin"
  ln -sfn "$exe" "$DIR/bin/$bin"
  log "$bin $version: $DIR/bin/$bin"
  # Older versions left behind.
  local old
  for old in "$DIR/$name"-*; do
    [ "$old" = "$prefix" ] || [ ! -d "$old" ] || rm -rf "$old"
  done
}

case "${1:-}" in
  install)
    rc=0
    install_one claude-code @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" claude || rc=1
    install_one opencode opencode-ai "$OPENCODE_VERSION" opencode || rc=1
    exit "$rc"
    ;;
  status)
    "$DIR/bin/claude" --version && "$DIR/bin/opencode" --version
    ;;
  *)
    echo "usage: $0 install|status" >&2
    exit 2
    ;;
esac
