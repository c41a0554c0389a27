// Package argohealth proves the health checks of deploy/argocd/argocd-cm-health.yaml on a real
// Argo CD v3.4.2: with them in argocd-cm, an Application that manages a ClusterRuntime (and a
// RuntimeRollout) is Progressing while the rollout runs, Degraded once it failed and Healthy when
// the runtime is Ready. The test writes the objects' status the way the planner does; no
// operator binary runs.
package argohealth
