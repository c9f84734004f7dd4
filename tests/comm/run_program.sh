#!/usr/bin/env bash
# Runs a benchmark command line and passes when its exit code is EXPECTED_RC and its output
# matches PATTERN (an extended regex); with JSON_FILE other than "-", the file must also be a
# valid measurement document (check_measurement.py).
# Usage: run_program.sh EXPECTED_RC PATTERN JSON_FILE COMMAND...
set -u
expected=$1 pattern=$2 json=$3
shift 3
[ "$json" = "-" ] || rm -f "$json"
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$expected" ]; then
  echo "run_program: exit code $rc, expected $expected"
  exit 1
fi
if ! grep -Eq -- "$pattern" <<<"$out"; then
  echo "run_program: the output does not match /$pattern/"
  exit 1
fi
if [ "$json" != "-" ]; then
  python3 "$(dirname "${BASH_SOURCE[0]}")/check_measurement.py" "$json" || exit 1
fi
exit 0
