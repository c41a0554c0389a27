#!/usr/bin/env bash
# Fails when generated files are stale, when a module is untidy, when go work sync would change
# anything, when the docs' mechanical facts (the modules, the deployables, the binaries' outside
# connections) no longer match the workspace, when README.md's performance figures are not those of
# docs/performance.md's current table, when two k8s.io minor versions appear in the workspace build list, when a module wall
# is crossed, when a tracked file names a machine path or a document outside the repository, when
# a Go file is not gofmt-ed, or when shipped code calls a known vulnerable function (govulncheck,
# against an offline copy of the Go vulnerability database: hack/tools.sh govulncheck). Import
# names are golangci-lint's importas (make lint, .golangci.yml).
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
snapshot() { git status --porcelain --untracked-files=all -- "$@" ; git diff -- "$@"; }

echo "verify: generated code, CRDs and NATS permissions"
before=$(snapshot shared/api shared/argoapp deploy/charts deploy/compose docs/security.md 2>/dev/null || true)
make -s generate >/dev/null
after=$(snapshot shared/api shared/argoapp deploy/charts deploy/compose docs/security.md 2>/dev/null || true)
if [ "$before" != "$after" ]; then
  echo "  stale generated files; run 'make generate' and commit:"; git status --short shared/api shared/argoapp deploy/charts deploy/compose docs/security.md; fail=1
fi

echo "verify: go.mod/go.sum tidy and go work sync"
mods=$(sed -n 's#^[[:space:]]*\./\([a-z0-9-]*\)$#\1#p' go.work)
before=$(snapshot go.work go.work.sum $(for m in $mods; do echo "$m/go.mod $m/go.sum"; done))
for m in $mods; do (cd "$m" && GOWORK=off GOFLAGS=-mod=mod go mod tidy); done
go work sync
after=$(snapshot go.work go.work.sum $(for m in $mods; do echo "$m/go.mod $m/go.sum"; done))
if [ "$before" != "$after" ]; then
  echo "  modules are not tidy; run 'make tidy' and commit:"; git status --short -- '*go.mod' '*go.sum' go.work; fail=1
fi

echo "verify: one k8s.io minor version"
# (go list -m all cannot load the whole graph: k8s.io/kubernetes names its staging modules at
# v0.0.0; the workspace only builds against the modules its packages import.)
minors=$(go list -m k8s.io/api k8s.io/apimachinery k8s.io/client-go k8s.io/apiextensions-apiserver | awk '{split($2, v, "."); print v[1]"."v[2]}' | sort -u)
if [ "$(echo "$minors" | wc -l)" -ne 1 ]; then
  echo "  more than one k8s.io minor version in the workspace: $(echo $minors)"; fail=1
fi
echo "verify: module walls"
# shared holds the contracts: it needs neither Argo CD nor nats-server, and imports no other module.
heavy=$(go list -deps -test ./shared/... | grep -E '^github.com/argoproj/|^github.com/nats-io/nats-server|aicr-operator/(servicekit|testkit|planner|applier|readiness|credrefresher|admission|cli|e2e)/' | sort -u || true)
if [ -n "$heavy" ]; then
  echo "  shared (with its tests) imports what it must not:"; echo "$heavy" | sed 's/^/    /'; fail=1
fi
# the kubectl plugin links no NATS server
if go list -deps ./cli/cmd/kubectl-aicr | grep '^github.com/nats-io/nats-server' >/dev/null; then
  echo "  kubectl-aicr links nats-server"; fail=1
fi
# the test harnesses reach a binary only through its tests: no non-test package of a binary's
# module, nor of shared or servicekit, imports testkit
for m in shared servicekit planner applier readiness credrefresher admission setup cli; do
  bad=$(go list -f '{{.ImportPath}}: {{join .Imports " "}}' ./$m/... | grep 'aicr-operator/testkit/' || true)
  if [ -n "$bad" ]; then echo "  $m imports testkit outside its tests:"; echo "$bad" | sed 's/^/    /'; fail=1; fi
done
# no binary imports another binary's module
for m in planner applier readiness credrefresher admission setup cli; do
  bad=$(go list -deps -test ./$m/... | grep -E "aicr-operator/(planner|applier|readiness|credrefresher|admission|setup|cli)/" | grep -v "aicr-operator/$m/" || true)
  if [ -n "$bad" ]; then echo "  $m imports another binary:"; echo "$bad" | sed 's/^/    /'; fail=1; fi
done
# the gitops-engine replace stands in exactly the go.mod files of modules that import Argo CD
for m in $mods; do
  # grep reads all of go list's output (no -q): an early exit would kill go list with SIGPIPE,
  # and pipefail would then say "no".
  uses=no; go list -deps -test ./$m/... | grep '^github.com/argoproj/argo-cd/v3/' >/dev/null && uses=yes
  has=no; grep -q 'gitops-engine =>' "$m/go.mod" && has=yes
  if [ "$uses" != "$has" ]; then echo "  $m imports Argo CD: $uses; carries the gitops-engine replace: $has"; fail=1; fi
done

echo "verify: the docs' mechanical facts"
# What docs/architecture.md and README.md say of the workspace, kept true: the number and names of
# the modules (go.work), the deployables table (the Makefile's SERVICES, v1alpha1.Binaries; its
# Reads and Writes columns are e2e/modgraph's test, against shared/kubeaccess), and
# the binaries' outside connections (no binary links a NATS server; the planner and the plugin,
# and no other binary, link the OCI registry client).
numbers=(zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen)
count=$(echo "$mods" | wc -w)
if ! grep -q "One Go workspace (\`go.work\`), ${numbers[$count]:-$count} modules" docs/architecture.md; then
  echo "  docs/architecture.md does not say the workspace has ${numbers[$count]:-$count} modules"; fail=1
fi
for m in $mods; do
  grep -qE "^\| (\`[a-z]+\`, )*\`$m\`" docs/architecture.md || { echo "  docs/architecture.md's module table lacks $m"; fail=1; }
  grep -qE "(^|[[:space:]])$m/" README.md || { echo "  README.md's layout lacks $m/"; fail=1; }
done
services=$(sed -n 's/^SERVICES := //p' Makefile)
table=$(awk '/^## The deployables/{on=1; next} on && /^## /{exit} on && /^\| [a-z]+ \|/{print $2}' docs/architecture.md | tr '\n' ' ' | sed 's/ $//')
if [ "$table" != "$services" ]; then
  echo "  docs/architecture.md's deployables table lists '$table', the Makefile's SERVICES '$services'"; fail=1
fi
for b in $services setup cli/cmd/kubectl-aicr; do
  deps=$(go list -deps ./$b)
  if echo "$deps" | grep -q '^github.com/nats-io/nats-server'; then echo "  $b links nats-server (the docs say no binary does)"; fail=1; fi
  oci=no; echo "$deps" | grep -q 'aicr-operator/shared/ociregistry$' && oci=yes
  want=no; case $b in planner|cli/cmd/kubectl-aicr) want=yes ;; esac
  if [ "$oci" != "$want" ]; then echo "  $b links shared/ociregistry: $oci; the docs say: $want"; fail=1; fi
done

# README.md's performance table quotes the current table of docs/performance.md: every figure
# of it (its second column) and the commit it was measured at stand in that section, so a new
# current table that leaves the README's behind fails here.
current=$(awk '/^## Current figures/{on=1; next} on && /^## /{exit} on' docs/performance.md | sed 's/\*\*//g')
readmeperf=$(awk '/^## Performance/{on=1; next} on && /^## /{exit} on' README.md)
figures=$(echo "$readmeperf" | awk -F' [|] ' '/^[|] / && !/^[|] (Figure|---) / {print $2}')
if [ -z "$figures" ] || [ -z "$current" ]; then
  echo "  README.md's performance table or docs/performance.md's current figures not found"; fail=1
fi
while IFS= read -r fig; do
  [ -z "$fig" ] || grep -qF -- "$fig" <<<"$current" || { echo "  README.md's performance figure '$fig' is not in docs/performance.md's current figures"; fail=1; }
done <<<"$figures"
for c in $(echo "$readmeperf" | grep -oE 'commit `[0-9a-f]{7,40}`' | tr -d '`' | awk '{print $2}'); do
  grep -q "$c" <<<"$current" || { echo "  README.md's performance figures name commit $c; docs/performance.md's current figures do not"; fail=1; }
done

echo "verify: the repository stands on its own"
# No tracked file names a path of the development machine (under the work or root folders, or a
# temporary file other than the aicr-* folders the harness creates) or a document outside the
# repository (the design, spec, fixtures and hooks folders beside it, or their pages by name): what
# a reader needs is copied in (docs/argocd.md, the testdata READMEs). The [x] classes keep this
# script from matching itself.
outside=$( {
  git grep -nIE -e '(^|[^[:alnum:]_.~-])/([w]ork|[r]oot)/' \
    -e 'shared/([s]pec|[d]esign|[f]ixtures|[h]ooks)([^[:alnum:]_-]|$)' \
    -e '(^|[^[:alnum:]_-])([a]rgocd-engine|[a]icr-operator|[l]ocalstack|[t]oolchain|[s]tyle)\.md' \
    -e '[f]ixtures/argocd-v' || true
  # deploy/compose names paths inside the stack's containers (their /tmp), not the machine's.
  git grep -nIE '/[t]mp/' -- ':!deploy/compose/' | sed -E 's#/[t]mp/(aicr-|\.\.\.)#(harness dir)#g' | grep -E '(^|[^[:alnum:]_.~-])/[t]mp/' || true
} | sort -u)
if [ -n "$outside" ]; then
  echo "  tracked files name a machine path or a document outside the repository:"; echo "$outside" | sed 's/^/    /'; fail=1
fi

echo "verify: gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "  not gofmt-ed (run gofmt -w):"; echo "$unformatted" | sed 's/^/    /'; fail=1
fi
echo "verify: govulncheck (the binaries' modules; database golang.org/x/vulndb@$(sed -n 's/^VULNDB_VERSION=//p' hack/tools.sh))"
# The code of the binaries the images and the plugin ship (their modules' packages, with shared and
# servicekit as they use them; tests are not shipped). There is no network but the Go module proxy,
# so the database is built from the golang.org/x/vulndb module (hack/tools.sh, docs/testing.md).
# A called vulnerable function fails unless hack/vulns-accepted.txt lists it with the reason (and
# an entry no longer found fails too): hack/vulnfindings.go.
# govulncheck works one module at a time (it needs the module's go.mod where it runs) and mostly on
# one core: VERIFY_JOBS modules (default 2) at a time.
vc=$(hack/tools.sh bindir govulncheck)
vulndir=$(mktemp -d); trap 'rm -rf "$vulndir"' EXIT
vulnmods="planner applier readiness credrefresher admission setup cli"
printf '%s\n' $vulnmods |
  xargs -P "${VERIFY_JOBS:-2}" -I{} sh -c 'cd "{}" && "$0/govulncheck" -db "file://$0/vulndb" -format json ./... >"$1/{}.json" 2>"$1/{}.err" || touch "$1/{}.failed"' "$vc" "$vulndir" || true
for f in "$vulndir"/*.failed; do
  [ -e "$f" ] || continue
  m=$(basename "$f" .failed); echo "  govulncheck failed in $m:"; sed 's/^/    /' "$vulndir/$m.err"; fail=1
done
if ! out=$(for m in $vulnmods; do cat "$vulndir/$m.json" 2>/dev/null; done | GOWORK=off go run hack/vulnfindings.go hack/vulns-accepted.txt); then
  echo "$out" | sed 's/^/  /'; fail=1
else
  [ -z "$out" ] || echo "$out" | sed 's/^/  /'
fi

[ "$fail" = 0 ] && echo "verify: ok"
exit $fail
