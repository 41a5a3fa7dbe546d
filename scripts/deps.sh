#!/usr/bin/env bash
# Install the Debian packages pdref needs, only those missing; apt-get update once if any are.
# --test adds what only `make test` needs: headless Chromium (and a font) for
# tests/report_browser_test.sh.
set -euo pipefail
pkgs=(cmake make gcc pkg-config clang-14 libclang-rt-14-dev libcjson-dev libcunit1-dev
      libcurl4-openssl-dev libmicrohttpd-dev valgrind parallel python3
      help2man groff-base python3-jsonschema)
missing=()
if [ "${1:-}" = --test ]; then pkgs+=(chromium fonts-dejavu-core); fi
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
