// Package logstream proves each binary writes one stream of JSON lines: its own logs, client-go's
// and leader election's klog lines and the standard library's log (net/http's server errors),
// all with the same fields (integration tier: the real binaries, a kube-apiserver and NATS).
package logstream
