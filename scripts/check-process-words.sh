#!/usr/bin/env bash
# The project is the product, not a lab notebook: how a change came about
# (numbered work sessions, lettered benchmark runs, issue numbers, measurement
# histories) belongs in commit messages, not in tracked files. This check
# fails, listing file:line, on the words that betray such narrative.
#
# Durations are allowed ("stops 5 s", "a session 30 min"); data files
# (*.json, *.sum) and images are not checked. Run by `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."

units='ns|µs|us|ms|s|secs?|seconds?|m|mins?|minutes?|h|hours?|d|days?'
pattern="\\b(?:[Ss]tops?|[Ss]essions?) [0-9]+\\b(?! ?(?:${units})\\b)"
pattern+="|\\b[Rr]uns? [A-Z]{2}\\b"
pattern+="|\\b[Ii]ssues? [0-9]{1,3}\\b"
# Written so that this file does not match itself.
pattern+="|performance[-]history"
pattern+="|tried and not[ ]kept"

if hits=$(git grep -nIP "$pattern" -- . ':(exclude)*.sum' ':(exclude)*.json' ':(exclude)*.png' ':(exclude)*.svg'); then
	echo "check-process-words: lab-notebook words in tracked files (put them in the commit message instead):" >&2
	echo "$hits" >&2
	exit 1
fi
