#!/usr/bin/env bash
# Rewrites the pictures under docs/ from their sources, with Graphviz (Debian's graphviz package is
# installed when dot is missing):
#
#   docs/modules.dot, docs/modules.svg   the module graph, from the workspace's imports
#                                        (e2e/modgraph's TestModuleGraph -update)
#   docs/images/example-rollout.png      the example GPU-stack rollout of make demo, part way (five
#                                        of nine steps done, gpu-operator in flight), drawn by
#                                        kubectl aicr graph -f from the RuntimeRollout recorded in
#                                        docs/images/example-rollout.yaml (kubectl get
#                                        runtimerollout NAME -o yaml during make demo)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v dot >/dev/null; then
  echo "docs-images: dot is missing; installing Debian's graphviz"
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  # Lock::Timeout: wait for a dpkg lock another install holds, rather than fail.
  $sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends graphviz >/dev/null ||
    { $sudo apt-get -o DPkg::Lock::Timeout=600 update >/dev/null && $sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends graphviz >/dev/null; }
fi

go test -count=1 -run '^TestModuleGraph$' ./e2e/modgraph -update
dot -Tsvg docs/modules.dot -o docs/modules.svg
# The picture and its source agree now; the test proves it.
go test -count=1 -run '^TestModuleGraph$' ./e2e/modgraph
echo "docs-images: docs/modules.dot and docs/modules.svg rewritten"

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/kubectl-aicr" ./cli/cmd/kubectl-aicr
"$bin/kubectl-aicr" graph -f docs/images/example-rollout.yaml -o dot > "$bin/rollout.dot"
dot -Tpng -Gdpi=110 -o docs/images/example-rollout.png "$bin/rollout.dot"
echo "docs-images: docs/images/example-rollout.png rendered ($(dot -V 2>&1))"
