// Package imagebuild builds the operator's container images without a container engine: each
// binary (the five services, the setup Job and kubectl-aicr) cross-compiled with CGO_ENABLED=0
// for linux/amd64 and linux/arm64 and laid on a minimal static base this package assembles itself
// (Debian's CA certificates, a passwd and group entry for the non-root user 65532, no shell), one
// multi-platform OCI index per binary, with the OCI labels and an SPDX SBOM of the binary's Go
// build information in the image. make images writes them as an OCI image layout
// (docs/install.md#images); REGISTRY=host:port/prefix pushes them.
//
// The same commit builds the same digests: every timestamp is the commit's time
// (SOURCE_DATE_EPOCH), tar entries are sorted with fixed owners and modes, the gzip headers carry
// no name or time, and the Go builds are -trimpath. The CA bundle comes from the
// ca-certificates .deb in the cache folder (fetched once with apt-get download), so a later
// Debian update changes the images only when that file is replaced.
package imagebuild
