// Package gitops installs the operator's chart the way Argo CD users install everything: the chart
// pushed to the local stack's OCI registry, one Application, a real Argo CD v3.4.2 (kwok runs the
// pods, so the images need not exist). It reaches Synced and Healthy, and stays Synced across a
// hard refresh, which re-renders the chart with helm template.
package gitops
