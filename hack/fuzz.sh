#!/usr/bin/env bash
# Runs every Fuzz target of the workspace, one target at a time (go test -fuzz takes one
# package and one target per run), for FUZZTIME each.
#
#   hack/fuzz.sh [FUZZTIME] [PACKAGE...]
#
#   FUZZTIME       per target, as go test -fuzztime takes it: 60s (default), 5m, 10000x
#   PACKAGE        limit the run to these package folders (./shared/plan ...); all when none
#   FUZZ_PARALLEL  go test -parallel: fuzzing workers (default: GOMAXPROCS)
#   FUZZ_TIMEOUT   go test -timeout of each run, a guard against a hang (default 30m)
#   FUZZ_MINIMIZE_TIME  go test -fuzzminimizetime (default 5s). Go's default, 60s, spends most of
#                  a short run minimising each new interesting input: this workspace's test
#                  binaries carry coverage counters for Kubernetes and Argo CD, which makes
#                  every minimisation step slow.
#
# A failing input is written by go test to <package>/testdata/fuzz/<FuzzX>/ and from then on
# runs as a regression case in every plain `go test`: commit it with the fix. The script keeps
# going after a failure and exits 1 at the end, naming the targets that failed.
#
# The corpus a run grows (the inputs that reached new code) lives in go's build cache; after
# each target the script copies the new entries into <package>/testdata/fuzz/<FuzzX>/ too, so
# that committing them keeps what the fuzzer found for every later `go test` and fuzz run
# (FUZZ_KEEP_CORPUS=0 skips the copy).
set -euo pipefail

cd "$(dirname "$0")/.."
FUZZTIME=${1:-${FUZZTIME:-60s}}
shift || true
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-30m}
FUZZ_MINIMIZE_TIME=${FUZZ_MINIMIZE_TIME:-5s}
FUZZ_KEEP_CORPUS=${FUZZ_KEEP_CORPUS:-1}
cache=$(go env GOCACHE)/fuzz

log() { printf '[fuzz] %s\n' "$*" >&2; }

# The workspace's modules, from go.work.
mapfile -t modules < <(sed -n 's#^[[:space:]]*\./\([a-z0-9-]*\)$#\1#p' go.work)
if [[ $# -gt 0 ]]; then
  roots=("$@")
else
  roots=("${modules[@]}")
fi

# Files with a fuzz target; files behind a build constraint need tags and a tier's
# processes, so they are left to that tier.
mapfile -t files < <(grep -rl --include='*_test.go' '^func Fuzz' "${roots[@]}" | sort)
targets=()
for f in "${files[@]}"; do
  if grep -q '^//go:build' "$f"; then
    log "skip $f (build constraint)"
    continue
  fi
  dir=./$(dirname "${f#./}")
  while read -r name; do
    targets+=("$dir $name")
  done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$f")
done
if [[ ${#targets[@]} -eq 0 ]]; then
  log "no fuzz targets under ${roots[*]}"
  exit 0
fi

log "${#targets[@]} targets, ${FUZZTIME} each"
failed=()
for t in "${targets[@]}"; do
  read -r dir name <<<"$t"
  log "$name in $dir"
  args=(-run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" -timeout="$FUZZ_TIMEOUT" -fuzzminimizetime="$FUZZ_MINIMIZE_TIME")
  if [[ -n ${FUZZ_PARALLEL:-} ]]; then
    args+=(-parallel="$FUZZ_PARALLEL")
  fi
  if ! go test "${args[@]}" "$dir"; then
    failed+=("$name ($dir)")
    log "FAIL $name: the failing input is in $dir/testdata/fuzz/$name/"
  fi
  if [[ $FUZZ_KEEP_CORPUS == 1 ]]; then
    grown=$cache/$(go list "$dir")/$name
    if [[ -d $grown ]]; then
      mkdir -p "$dir/testdata/fuzz/$name"
      before=$(find "$dir/testdata/fuzz/$name" -type f | wc -l)
      cp -n "$grown"/* "$dir/testdata/fuzz/$name/" 2>/dev/null || true
      after=$(find "$dir/testdata/fuzz/$name" -type f | wc -l)
      log "$name: corpus $after entries in $dir/testdata/fuzz/$name ($((after - before)) new)"
    fi
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  log "failed: ${failed[*]}"
  exit 1
fi
log "all ${#targets[@]} targets passed"
