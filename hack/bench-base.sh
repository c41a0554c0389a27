#!/usr/bin/env bash
# bench-base.sh REV: builds the planner, applier and readiness of commit REV (with the images'
# build flags, as make build does) into the user cache, once per commit, and prints the folder.
# make bench-compare measures them beside bin/'s (e2e/bench -bench.compare).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: hack/bench-base.sh REV (a commit, tag or branch)" >&2; exit 2; }
rev=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "bench-base: $1 names no commit of this repository" >&2; exit 2; }
dir="${XDG_CACHE_HOME:-$HOME/.cache}/aicr-operator/bench-base/$rev"
if [ ! -x "$dir/readiness" ]; then
  wt=$(mktemp -d)
  trap 'git worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"' EXIT
  git worktree add --detach --quiet "$wt" "$rev"
  mkdir -p "$(dirname "$dir")"
  rm -rf "$dir.tmp"
  (cd "$wt" && CGO_ENABLED=0 go build -trimpath -o "$dir.tmp/" ./planner ./applier ./readiness) >&2
  mv "$dir.tmp" "$dir"
fi
echo "$dir"
