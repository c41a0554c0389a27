// Package modgraph keeps the module graph of docs/architecture.md true: its test derives the
// graph from the workspace's imports (go list) and fails when docs/modules.dot, or the picture
// rendered from it (docs/modules.svg), says otherwise. `make docs-images` rewrites both. It also
// holds the deployables table's Reads and Writes columns to the calls shared/kubeaccess declares.
package modgraph
