// Package aicrimport holds the end-to-end test of an AICR bundle folder (what `aicr bundle`
// writes) imported with kubectl aicr bundle import and rolled out on the local stack with a real
// Argo CD v3.4.2.
package aicrimport
