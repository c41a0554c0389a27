// Package ociregistry is a small OCI distribution client over net/http: push a blob and a
// manifest, resolve a tag to its digest, and pull a manifest or blob by digest with a size limit,
// verifying every digest it reads. It authenticates anonymously, with basic auth, or through the
// registry token flow (a 401 answering WWW-Authenticate: Bearer realm, service, scope; the token
// is asked for with the username and password). ECR's tokens are basic auth of "AWS:<token>",
// exactly what Argo CD's repo-creds Secret holds, so they need nothing special.
//
// The planner pulls bundles with it and the kubectl plugin pushes them (and charts); it links no
// OCI SDK so both stay small. The artifact shapes the operator uses are in artifact.go: the
// bundle artifact (BundleArtifactType) and Helm's chart layout.
package ociregistry
