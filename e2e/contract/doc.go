// Package contract holds the tests that pin the operator's own contract types to the upstream
// ones they mirror. They live here, not beside the types in shared, because only this module may
// import Argo CD: shared stays free of it, so the binaries that use shared do too.
package contract
