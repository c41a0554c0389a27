// Package engine holds the end-to-end test of a runtime created before Argo CD is installed: it
// reports EngineAvailable=False/EngineMissing and starts no step, then rolls out once Argo CD's
// CRDs and Argo CD appear. Its stack starts without Argo CD (stack.Options.DeferArgoCD).
package engine
