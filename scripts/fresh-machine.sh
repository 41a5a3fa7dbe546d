#!/usr/bin/env bash
# The README on a fresh machine: a minimal Debian 12 root (debootstrap --variant=minbase
# bookworm), a clean clone of one commit of this repository in it, only the README's
# prerequisites installed (make, git), then the README's two commands as root: `make sim`,
# `make test`. Before them, `make sim` as a user with no sudo must stop and print the apt-get
# command to run as root; after them, the same user's `make sim` must pass. Not part of
# `make test` (it takes 30-60 minutes on two cores); docs/fresh-machine.md.
#   sudo scripts/fresh-machine.sh [--ref REF] [--root DIR] [--keep] [--mirror URL]
# Exit: 0 every step passed, 1 a step failed (its log is named), 2 bad usage or the root could
# not be made (not root, no debootstrap, debootstrap or the clone failed).
set -euo pipefail
# One compound command, read whole before it runs: the script may be edited (or checked out at
# another commit) while a run of it takes its 30-60 minutes.
{

usage() {
  cat <<'USAGE'
usage: scripts/fresh-machine.sh [--ref REF] [--root DIR] [--keep] [--mirror URL]
Builds a minimal Debian 12 root with debootstrap, clones REF of this repository into it
(/root/pdref; committed work only: uncommitted changes do not leak in), installs what the
README asks for first (make git) and runs the README's commands inside it with chroot:
  1. as an unprivileged user without sudo: make sim must exit non-zero and print the
     apt-get command to run as root (and no "sudo: not found");
  2. as root: make sim (must pass, and print no apt/debconf output), then make test;
  3. as the user again: make sim must pass now that the packages are there.
Reports each step's result and time; logs are kept in DIR.logs/. Run as root.
  --ref REF     the commit to test (default HEAD)
  --root DIR    where to build the root (must not exist or be empty;
                default a new /var/tmp/pdref-fresh.XXXXXX)
  --keep        keep the root afterwards (default: removed once unmounted)
  --mirror URL  the Debian mirror (default: the one this machine's apt uses)
  -h, --help    this text
exit: 0 every step passed, 1 a step failed, 2 bad usage or the root could not be made
USAGE
}

die() { echo "fresh-machine: $*" >&2; exit 2; }

ref=HEAD root="" keep=0 mirror=""
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --keep) keep=1 ;;
    --ref|--root|--mirror)
      [ $# -ge 2 ] || die "$1 needs a value (try --help)"
      case $1 in --ref) ref=$2 ;; --root) root=$2 ;; --mirror) mirror=$2 ;; esac
      shift ;;
    --ref=*) ref=${1#*=} ;;
    --root=*) root=${1#*=} ;;
    --mirror=*) mirror=${1#*=} ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
  shift
done

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount)"
command -v debootstrap >/dev/null || die "no debootstrap: apt-get install debootstrap"
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel) || die "not in a git checkout"
sha=$(git -C "$repo" rev-parse --verify --quiet "$ref^{commit}") || die "--ref: '$ref' is not a commit"

# The bookworm mirror this machine's apt uses (one-line and deb822 sources alike).
host_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { for (i = 2; i < NF; i++) if ($i ~ /^https?:\/\// && $(i + 1) == "bookworm")
         { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = "" } /Suites:[^\n]*bookworm( |\n|$)/ && match($0, /URIs: *[^ \n]+/) {
         u = substr($0, RSTART, RLENGTH); sub(/URIs: */, "", u); print u; exit }' "$f"
  done
}
[ -n "$mirror" ] || mirror=$(host_mirror | head -1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

if [ -z "$root" ]; then
  root=$(mktemp -d /var/tmp/pdref-fresh.XXXXXX)
else
  [ ! -e "$root" ] || [ -z "$(ls -A "$root")" ] || die "--root: $root exists and is not empty"
  mkdir -p "$root"
fi
root=$(realpath "$root")
chmod 755 "$root" # mktemp makes it 0700, and the root's / must let its user in
logs=$root.logs
mkdir -p "$logs"
user=pdref-user

# Everything mounted under the root, unmounted (innermost first) on every way out; the root
# itself is removed only when nothing is mounted under it any more.
mounted=()
# shellcheck disable=SC2317 # run by the trap
cleanup() {
  local rc=$? i p
  for p in /proc/[0-9]*; do # what the steps left running in the root (a stuck test)
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" 2>/dev/null ||
      echo "fresh-machine: could not unmount ${mounted[i]}" >&2
  done
  if grep -q " $root/" /proc/mounts; then
    echo "fresh-machine: still mounted under $root; left in place" >&2
  elif [ "$keep" = 1 ]; then
    echo "fresh-machine: root kept in $root"
  else
    rm -rf --one-file-system "$root"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 2' INT TERM HUP

mount_in() { # mount_in TYPE|--bind SOURCE TARGET [OPTIONS]
  mkdir -p "$root$3"
  if [ "$1" = --bind ]; then mount --bind "$2" "$root$3"
  else mount -t "$1" -o "${4:-defaults}" "$2" "$root$3"; fi
  mounted+=("$root$3")
}

steps=() failed=0
now() { date +%s; }
record() { # record NAME RESULT SECONDS [NOTE]
  steps+=("$(printf '%-36s %-4s %5ss%s' "$1" "$2" "$3" "${4:+  $4}")")
  echo "fresh-machine: $1: $2 (${3}s)${4:+ $4}"
}

# in_root [--user] COMMAND: a login-like shell in the root, with a clean environment.
in_root() {
  local spec=() home=/root
  if [ "$1" = --user ]; then # the ids from the root's own passwd (the host has no such user)
    spec=(--userspec="$(awk -F: -v u="$user" '$1 == u { print $3 ":" $4 }' "$root/etc/passwd")")
    home=/home/$user
    shift
  fi
  nice -n 10 chroot "${spec[@]}" "$root" /usr/bin/env -i HOME="$home" LOGNAME="${home##*/}" \
    USER="${home##*/}" \
    SHELL=/bin/bash PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "$1"
}

echo "fresh-machine: $sha ($ref) in $root, mirror $mirror, logs in $logs"
t=$(now)
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$logs/debootstrap.log" 2>&1 ||
  { tail -20 "$logs/debootstrap.log" >&2; die "debootstrap failed ($logs/debootstrap.log)"; }
record "debootstrap minbase bookworm" ok $(($(now) - t)) "$(chroot "$root" dpkg-query -W | wc -l) packages"

# What a booted machine has: /proc, /sys, /dev with its /dev/pts and /dev/shm.
mount_in proc proc /proc
mount_in sysfs sysfs /sys
mount_in --bind /dev /dev
mount_in devpts devpts /dev/pts newinstance,ptmxmode=0666,mode=620
mount_in tmpfs tmpfs /dev/shm mode=1777

# The clone: that commit only (a clean clone, as a user would have it)
if ! { git clone -q --no-local --no-checkout "$repo" "$root/root/pdref" &&
       git -C "$root/root/pdref" checkout -q --detach "$sha"; } >"$logs/clone.log" 2>&1; then
  die "git clone of $sha failed ($logs/clone.log)"
fi
[ -z "$(git -C "$root/root/pdref" status --porcelain)" ] || die "the clone is not clean"

# The README's prerequisites, nothing else
t=$(now)
in_root 'export DEBIAN_FRONTEND=noninteractive; apt-get update && apt-get install -y make git' \
  >"$logs/prerequisites.log" 2>&1 || { record "apt-get install make git" FAIL $(($(now) - t)); exit 1; }
resolves="localhost resolves" # netbase's /etc/hosts, when the prerequisites brought it
chroot "$root" getent hosts localhost >/dev/null || resolves="localhost does not resolve"
record "apt-get install make git" ok $(($(now) - t)) \
  "$(chroot "$root" dpkg-query -W | wc -l) packages; $resolves"

# 1. A user without sudo: make sim stops, printing the apt-get command to run as root
in_root "useradd -m -s /bin/bash $user" >"$logs/useradd.log" 2>&1 || die "useradd failed"
if ! { git clone -q --no-local "$root/root/pdref" "$root/home/$user/pdref" &&
       in_root "chown -R $user:$user /home/$user/pdref"; } >"$logs/clone-user.log" 2>&1; then
  die "the user's clone failed ($logs/clone-user.log)"
fi
t=$(now) rc=0
log=$logs/user-make-sim-no-sudo.log
in_root --user 'cd ~/pdref && make sim' >"$log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ]; then note="exit 0, though the packages were missing"
elif grep -q 'sudo: not found\|sudo: command not found' "$log"; then note="exit $rc, sudo: not found"
elif ! grep -q '^  apt-get update && apt-get install -y --no-install-recommends cmake ' "$log"; then
  note="exit $rc, no apt-get command printed"
else note="exit $rc, printed: $(grep -m1 '^  apt-get update' "$log" | cut -c3-70)..."; fi
if [ "$rc" -ne 0 ] && [ "${note#*printed:}" != "$note" ]; then
  record "user, no sudo: make sim stops" ok $(($(now) - t)) "$note"
else
  record "user, no sudo: make sim stops" FAIL $(($(now) - t)) "$note"
  failed=1
fi

# 2. The README's two commands, as root
t=$(now)
if in_root 'cd ~/pdref && make sim' >"$logs/make-sim.log" 2>&1; then
  # make sim is quiet: deps' one line, the table and the report line, no apt or debconf
  leaks=$(grep -ci 'debconf\|dpkg\|^E: \|^W: \|apt-get\|Reading package' "$logs/make-sim.log" || true)
  if [ "$leaks" -eq 0 ]; then
    record "root: make sim" ok $(($(now) - t)) "$(grep -m1 '^sim: ' "$logs/make-sim.log")"
  else
    record "root: make sim" FAIL $(($(now) - t)) "$leaks lines of apt output"; failed=1
  fi
else
  record "root: make sim" FAIL $(($(now) - t)) "$(tail -1 "$logs/make-sim.log")"; failed=1
fi
t=$(now)
if in_root 'cd ~/pdref && make test' >"$logs/make-test.log" 2>&1; then
  record "root: make test" ok $(($(now) - t)) "$(grep -m1 '^tests: ' "$logs/make-test.log")"
else
  # the first failed test (CUnit's, or a script test's FAIL line), else make's last word
  note=$(grep -m1 -E -A1 '\.\.\.FAILED|^[a-z_]+: FAIL' "$logs/make-test.log" | tr -s ' \n' ' ' ||
         tail -1 "$logs/make-test.log")
  record "root: make test" FAIL $(($(now) - t)) "$note"
  failed=1
fi

# 3. The user again, the packages installed: make sim passes
t=$(now)
if in_root --user 'cd ~/pdref && make sim' >"$logs/user-make-sim.log" 2>&1; then
  record "user: make sim (packages there)" ok $(($(now) - t)) "$(grep -m1 '^sim: ' "$logs/user-make-sim.log")"
else
  record "user: make sim (packages there)" FAIL $(($(now) - t)) "$(tail -1 "$logs/user-make-sim.log")"
  failed=1
fi

echo "fresh-machine: $sha on a fresh minbase bookworm root:"
printf '  %s\n' "${steps[@]}"
if [ "$failed" -ne 0 ]; then echo "fresh-machine: FAIL (logs in $logs)"; exit 1; fi
echo "fresh-machine: ok (logs in $logs)"
exit 0
}
