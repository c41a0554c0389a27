// Package firstinstall installs the operator's chart as a platform team does on a fresh GPU
// cluster, with helm install and the recommended values (deploy/values/production.yaml), on a real
// kube-apiserver (Argo CD's CRDs, not the operator's, which the chart installs) that serves
// neither cert-manager's API nor the Prometheus Operator's: the
// operator's own stack installs those, so the first install must not need them (kwok runs the
// pods and completes the setup Job). Then the documented second step: once their CRDs are there,
// helm upgrade --reuse-values renders the Certificates, Issuers, ServiceMonitors and the
// PrometheusRule, and cert-manager takes the certificates over.
package firstinstall
