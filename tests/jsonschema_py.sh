# Sourced by the schema tests: run_with_jsonschema NAME SCRIPT ARGS... execs SCRIPT with a
# python3 that has jsonschema (the one on PATH, else Debian's /usr/bin/python3 with
# python3-jsonschema, installed by scripts/deps.sh); without one it names the test and exits 1.
run_with_jsonschema() {
  local name=$1
  shift
  for py in python3 /usr/bin/python3; do
    if "$py" -c 'import jsonschema' 2>/dev/null; then
      exec "$py" "$@"
    fi
  done
  echo "$name: no python3 with jsonschema (scripts/deps.sh installs python3-jsonschema)" >&2
  exit 1
}
