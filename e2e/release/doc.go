// Package release builds and publishes a release of aicr-operator (make release VERSION=…
// REGISTRY=…): the images of e2e/imagebuild, and the nats-server the chart runs, pushed to a
// registry; the chart, its values naming each of those images by digest, packaged and pushed with
// helm as an OCI artifact; kubectl-aicr for linux, darwin and windows on amd64 and arm64 as
// archives with a krew manifest carrying each archive's sha256; the release notes from
// CHANGELOG.md; and SHA256SUMS of every file. make plugin runs the plugin's part alone. Its e2e
// test releases to the local stack's registry and has Argo CD install the operator from the
// released chart, by digest (docs/install.md#releases).
package release
