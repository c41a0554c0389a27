#!/usr/bin/env bash
# Rewrites the pictures under docs/ from their sources: docs/modules.dot from the workspace's
# imports (e2e/modgraph's TestModuleGraph -update), then docs/modules.svg from it with Graphviz.
# Installs Debian's graphviz package when dot is missing.
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
