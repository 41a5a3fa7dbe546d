#!/usr/bin/env bash
# Install the Debian packages pdref needs, only those missing; apt-get update once if any are.
# --test adds what only `make test` needs: headless Chromium (and a font) for
# tests/report_browser_test.sh.
# Prints one line naming what it installs; apt's own output is kept back and printed only
# when apt fails. As root it runs apt-get; otherwise through sudo, and where there is no sudo
# it prints the apt-get command to run as root and exits 1.
set -euo pipefail
pkgs=(cmake make gcc pkg-config clang-14 libclang-rt-14-dev libcjson-dev libcunit1-dev
      libcurl4-openssl-dev libmicrohttpd-dev valgrind parallel python3
      help2man groff-base man-db python3-jsonschema)
missing=()
if [ "${1:-}" = --test ]; then pkgs+=(chromium fonts-dejavu-core); fi
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "deps: missing Debian packages: ${missing[*]}" >&2
    echo "deps: not root and no sudo to install them; as root, run:" >&2
    echo "  $cmd" >&2
    echo "deps: then run make again" >&2
    exit 1
  fi
  SUDO="sudo"
fi
echo "deps: installing ${missing[*]}${SUDO:+ (through sudo)}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
apt=(env DEBIAN_FRONTEND=noninteractive apt-get) # env: sudo resets the environment
[ -z "$SUDO" ] || apt=(sudo "${apt[@]}")
if ! { "${apt[@]}" update -qq && \
       "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "deps: apt-get failed installing ${missing[*]} (its output above)" >&2
  [ -z "$SUDO" ] || echo "deps: as root, this installs them: $cmd" >&2
  exit 1
fi
