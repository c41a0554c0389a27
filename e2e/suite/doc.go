// Package suite is the end-to-end suite: the whole operator on the local stack with a real
// Argo CD v3.4.2, one test per behaviour of the specification page. Its tests share one stack
// and run in order; each leaves the runtime Ready for the next.
package suite
