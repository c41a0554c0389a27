package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels the Helm chart puts on every Deployment of the operator (app.kubernetes.io/version is
// the chart's appVersion, the version the images are tagged with by default).
const (
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelComponent = "app.kubernetes.io/component"
	LabelVersion   = "app.kubernetes.io/version"
	PartOfOperator = "aicr-operator"
)

// Component is one Deployment of the operator.
type Component struct {
	// Name is the binary (the component label), else the Deployment's name.
	Name string `json:"name"`
	// Deployment is the Deployment's name.
	Deployment string `json:"deployment"`
	// Version is the Deployment's app.kubernetes.io/version label, else its image's tag.
	Version string `json:"version"`
	// Image is the first container's image.
	Image string `json:"image,omitempty"`
	// Ready is "ready/desired" replicas.
	Ready string `json:"ready"`
}

// OperatorComponents lists the operator's Deployments in the operator namespace: those labelled
// app.kubernetes.io/part-of=aicr-operator.
func (c *Client) OperatorComponents(ctx context.Context) ([]Component, error) {
	list, err := c.Kube.AppsV1().Deployments(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelPartOf + "=" + PartOfOperator})
	if err != nil {
		return nil, fmt.Errorf("list deployments labelled %s=%s in %s: %w", LabelPartOf, PartOfOperator, c.Namespace, err)
	}
	var out []Component
	for _, d := range list.Items {
		comp := Component{Name: d.Labels[LabelComponent], Deployment: d.Name, Version: d.Labels[LabelVersion]}
		if comp.Name == "" {
			comp.Name = d.Name
		}
		if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
			comp.Image = cs[0].Image
			if comp.Version == "" {
				comp.Version = imageTag(cs[0].Image)
			}
		}
		desired := int32(1)
		if d.Spec.Replicas != nil {
			desired = *d.Spec.Replicas
		}
		comp.Ready = fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired)
		out = append(out, comp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// imageTag is the tag of an image reference ("" for a digest-only or untagged one).
func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[colon+1:]
	}
	return ""
}
