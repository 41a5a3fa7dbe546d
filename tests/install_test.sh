#!/usr/bin/env bash
# `make install DESTDIR=<scratch>`: the binaries run and print their version, every man page
# is installed and renders without a warning, the scenario schema, library and documents are
# there, nothing was written outside DESTDIR, and PREFIX moves it all. Also the version
# itself: git describe in this checkout, the project version in a source tree without git.
#   tests/install_test.sh [BUILD]     (default build; run by `make test`)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fails=0
fail() { echo "install_test: FAIL $*"; fails=$((fails + 1)); }

install_to() { # DESTDIR PREFIX
  if ! make --no-print-directory install BUILD="$build" DESTDIR="$1" PREFIX="$2" \
       >"$scratch/install.log" 2>&1; then
    cat "$scratch/install.log"
    echo "install_test: FAIL make install DESTDIR=$1 PREFIX=$2"
    exit 1
  fi
}

stage=$scratch/stage
install_to "$stage" /usr/local
root=$stage/usr/local

# everything cmake installed (its list leaves DESTDIR out) is under DESTDIR
n_files=0
while read -r f; do
  n_files=$((n_files + 1))
  [ -f "$stage$f" ] || fail "$f is not under DESTDIR"
done <"$build/install_manifest.txt"
[ "$n_files" -gt 100 ] || fail "only $n_files files installed"

# the binaries
want_version=$("$build/pdref" --version)
for bin in pdref pdref-gateway; do
  [ -x "$root/bin/$bin" ] || { fail "$bin not installed in bin/"; continue; }
  got=$("$root/bin/$bin" --version) || fail "$bin --version exited $?"
  [ "$got" = "$bin ${want_version#pdref }" ] || fail "$bin --version printed '$got'"
done
json=$("$root/bin/pdref" --version --json)
python3 -c 'import json, sys; v = json.loads(sys.argv[1])["version"]; assert v and " " not in v' \
  "$json" || fail "pdref --version --json printed '$json'"
"$root/bin/pdref" sim run "$root/share/pdref/scenarios/happy-path-stream.json" \
  --mode reference >/dev/null || fail "the installed pdref does not pass an installed scenario"

# the version: git describe in a checkout; the project version in a tree without git, also
# when that tree sits inside another repository (an unpacked tarball in a packaging repo)
project=$(sed -n 's/^project(pdref VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
if command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1; then
  desc=$(git describe --tags --dirty 2>/dev/null || echo "$project-g$(git describe --always --dirty)")
  [ "${want_version#pdref }" = "$desc" ] || fail "pdref --version '$want_version', git says '$desc'"
fi
mkdir -p "$scratch/outer/pdref-src"
for dir in "$scratch/outer/pdref-src" "$scratch/outer"; do
  cmake -DSRC="$scratch/outer/pdref-src" -DOUT="$scratch/v.h" -DFALLBACK="$project" \
    -P cmake/version.cmake
  grep -qx "#define PD_VERSION \"$project\"" "$scratch/v.h" ||
    fail "version outside a checkout ($dir): $(tail -1 "$scratch/v.h")"
  command -v git >/dev/null || break
  git init -q "$scratch/outer" # the second pass: the tree inside another repository
done
# a checkout: the tag, the tag and the commits since it, or with no tag the commit
if command -v git >/dev/null; then
  repo=$scratch/tagged
  git init -q "$repo"
  g() { git -C "$repo" -c user.name=t -c user.email=t@t "$@"; }
  version_of() {
    cmake -DSRC="$repo" -DOUT="$scratch/v.h" -DFALLBACK="$project" -P cmake/version.cmake
    sed -n 's/^#define PD_VERSION "\(.*\)"$/\1/p' "$scratch/v.h"
  }
  g commit -q --allow-empty -m one
  [ "$(version_of)" = "$project-g$(g rev-parse --short HEAD)" ] || fail "untagged: $(version_of)"
  g tag v9.9.9
  [ "$(version_of)" = v9.9.9 ] || fail "at tag v9.9.9: $(version_of)"
  g commit -q --allow-empty -m two
  [ "$(version_of)" = "v9.9.9-1-g$(g rev-parse --short HEAD)" ] || fail "after v9.9.9: $(version_of)"
fi
cmake -DSRC=. -DOUT="$scratch/v.h" -DFALLBACK="$project" -DOVERRIDE=9.8.7 -P cmake/version.cmake
grep -q '"9.8.7"' "$scratch/v.h" || fail "-DPD_VERSION=9.8.7 does not override the version"

# the man pages: one per command of `pdref --help` (these at least), each renders without a
# warning, names its command and says what it takes
pages=(pdref:--version pdref-sim-run:--mode pdref-sim-new:--out pdref-sim-bench:--requests
       pdref-sim-explore:--seeds pdref-sim-explore-merge:RESULT pdref-gateway:--prefill
       pdref-gateway-bench:--concurrency pdref-mock:--role pdref-conform:--gateway-cmd)
mandir=$root/share/man/man1
# A page as plain text: man where it is installed, else groff, either way without the
# overstrikes (N\bNA\bA...) of a terminal's bold and underline: grotty writes them unless told
# -c (no SGR) and -b -o -u (no bold, overstrike or underline); `man -l` into a pipe runs col -b.
render() {
  { env -u MAN_KEEP_FORMATTING MANWIDTH=80 man -l "$1" 2>/dev/null ||
      groff -man -Tutf8 -P-cbou "$1" 2>/dev/null; }
}
for entry in "${pages[@]}"; do
  page=${entry%%:*} word=${entry#*:}
  [ -f "$mandir/$page.1" ] || { fail "man page $page.1 not installed"; continue; }
  grep -qe "$word" "$mandir/$page.1" || fail "$page.1 does not mention $word"
done
n_pages=0
for file in "$mandir"/*.1; do
  page=$(basename "$file" .1)
  n_pages=$((n_pages + 1))
  warnings=$(groff -man -Tutf8 -ww -z "$file" 2>&1)
  [ -z "$warnings" ] || fail "$page.1: groff warns: $warnings"
  text=$(render "$file")
  for section in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
    grep -q "^$section" <<<"$text" || fail "$page.1 has no $section section"
  done
  grep -q "^ *$page - " <<<"$text" || fail "$page.1: NAME does not name $page"
  [ "$(wc -l <<<"$text")" -ge 15 ] || fail "$page.1 renders to fewer than 15 lines"
done
[ "$n_pages" -ge "${#pages[@]}" ] || fail "$n_pages man pages installed, expected ${#pages[@]}"
[ ! -e "$mandir/wrap" ] || fail "the build's help2man wrappers were installed"

# the schema, the scenario library and the documents
cmp -s docs/scenario.schema.json "$root/share/pdref/scenario.schema.json" ||
  fail "share/pdref/scenario.schema.json is not docs/scenario.schema.json"
n_lib=$(find scenarios -name '*.json' | wc -l)
n_inst=$(find "$root/share/pdref/scenarios" -name '*.json' | wc -l)
[ "$n_lib" = "$n_inst" ] || fail "$n_inst of $n_lib scenarios installed"
for doc in README.md scenarios.md spec.md; do
  [ -f "$root/share/doc/pdref/$doc" ] || fail "share/doc/pdref/$doc not installed"
done

# make uninstall with the same DESTDIR removes every file
make --no-print-directory uninstall BUILD="$build" DESTDIR="$stage" >/dev/null
left=$(find "$stage" -type f | wc -l)
[ "$left" = 0 ] || fail "make uninstall left $left files"

# PREFIX moves everything
install_to "$scratch/stage2" /opt/pdref
for f in bin/pdref bin/pdref-gateway share/man/man1/pdref.1 share/pdref/scenario.schema.json; do
  [ -e "$scratch/stage2/opt/pdref/$f" ] || fail "PREFIX=/opt/pdref: no $f"
done

if [ "$fails" -ne 0 ]; then
  echo "install_test: $fails failures"
  exit 1
fi
echo "install_test: make install DESTDIR PREFIX: 2 binaries (${want_version#pdref }), $n_pages man pages, schema, $n_inst scenarios, docs"
