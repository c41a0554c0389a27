// Package crds embeds the operator's CustomResourceDefinitions, generated from
// shared/api/v1alpha1 by controller-gen (make generate). Tests install them from here, and the
// chart carries a copy.
package crds

import "embed"

// FS holds operator.aicr.run_clusterruntimes.yaml and operator.aicr.run_runtimerollouts.yaml.
//
//go:embed *.yaml
var FS embed.FS
