#!/usr/bin/env bash
# Written by `aicr bundle --deployer helm`: installs every NNN-*/ folder in order with its
# install.sh. aicr-operator does not run it; `kubectl aicr bundle import` reads the folders.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
for dir in [0-9][0-9][0-9]-*/; do
  "${dir}install.sh"
done
