package plantest

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Shape is a chart of a GPU stack whose Helm values the generator imitates: the chart's
// top-level sections and their usual keys (images, resources, probes, scheduling, the chart's
// own configuration lists), grown to about the size of the real chart's default values written
// as JSON without comments.
type Shape struct {
	// Name is the chart the shape follows.
	Name string
	// TargetKiB is the size of the generated values, within a KiB.
	TargetKiB int
	// NodeSelectorPath and TolerationsPath are where a system placement writes.
	NodeSelectorPath, TolerationsPath string

	sections func(v *valueGen) map[string]any
	grow     func(v *valueGen, m map[string]any, k int)
}

// GPUStackShapes are the charts of a GPU stack, the large ones first: kube-prometheus-stack,
// gpu-operator and network-operator carry tens of KiB of values, cert-manager, nvsentinel and
// skyhook a few KiB, and the small components (node-feature-discovery, JobSet, DCGM exporter,
// Kubeflow Trainer) one to three. One of each averages about 13 KiB per release.
func GPUStackShapes() []Shape {
	return []Shape{
		{Name: "kube-prometheus-stack", TargetKiB: 48, NodeSelectorPath: "prometheusOperator.nodeSelector", TolerationsPath: "prometheusOperator.tolerations",
			sections: kubePrometheusStack, grow: growList("prometheus", "prometheusSpec", "additionalScrapeConfigs", scrapeConfig)},
		{Name: "gpu-operator", TargetKiB: 32, NodeSelectorPath: "operator.nodeSelector", TolerationsPath: "daemonsets.tolerations",
			sections: gpuOperator, grow: growList("driver", "env", "", envVar)},
		{Name: "network-operator", TargetKiB: 16, NodeSelectorPath: "operator.nodeSelector", TolerationsPath: "operator.tolerations",
			sections: networkOperator, grow: growList("sriovNetworkOperator", "configDaemonNodeSelectorExtra", "", envVar)},
		{Name: "nvsentinel", TargetKiB: 12, NodeSelectorPath: "global.systemNodeSelector", TolerationsPath: "global.systemNodeTolerations",
			sections: nvsentinel, grow: growList("fault-quarantine", "ruleSets", "", quarantineRule)},
		{Name: "cert-manager", TargetKiB: 8, NodeSelectorPath: "nodeSelector", TolerationsPath: "tolerations",
			sections: certManager, grow: growList("extraArgs", "", "", flagArg)},
		{Name: "skyhook", TargetKiB: 4, NodeSelectorPath: "controllerManager.selectors", TolerationsPath: "controllerManager.tolerations",
			sections: skyhook, grow: growList("controllerManager", "manager", "env", envVar)},
		{Name: "node-feature-discovery", TargetKiB: 2, NodeSelectorPath: "master.nodeSelector", TolerationsPath: "master.tolerations",
			sections: nodeFeatureDiscovery, grow: growList("worker", "config", "sources.pci.deviceClassWhitelist", flagArg)},
		{Name: "dcgm-exporter", TargetKiB: 3, NodeSelectorPath: "nodeSelector", TolerationsPath: "tolerations",
			sections: dcgmExporter, grow: growList("extraEnv", "", "", envVar)},
		{Name: "jobset", TargetKiB: 2, NodeSelectorPath: "controller.nodeSelector", TolerationsPath: "controller.tolerations",
			sections: jobset, grow: growList("controller", "args", "", flagArg)},
		{Name: "kubeflow-trainer", TargetKiB: 2, NodeSelectorPath: "manager.nodeSelector", TolerationsPath: "manager.tolerations",
			sections: kubeflowTrainer, grow: growList("manager", "env", "", envVar)},
	}
}

// GPUStackValues is the values of shape for the i-th release: the same keys and about the same
// size for every i, with versions, replica counts and names that differ between releases. The
// result is valid JSON and the same on every call.
func GPUStackValues(s Shape, i int) json.RawMessage {
	n := growCount(s)
	raw, err := json.Marshal(s.build(i, n))
	if err != nil {
		panic(fmt.Sprintf("plantest: encode %s values: %v", s.Name, err)) // maps of strings, numbers and bools only
	}
	return raw
}

func (s Shape) build(i, grown int) map[string]any {
	v := &valueGen{i: i, chart: s.Name}
	m := s.sections(v)
	for k := range grown {
		s.grow(v, m, k)
	}
	return m
}

var growCounts sync.Map // shape name -> how many grow steps reach TargetKiB

// growCount is how many grow steps bring the shape's values of release 0 to its target size.
func growCount(s Shape) int {
	if n, ok := growCounts.Load(s.Name); ok {
		return n.(int)
	}
	m := s.build(0, 0)
	v := &valueGen{chart: s.Name}
	n := 0
	for ; n < 100000; n++ {
		raw, _ := json.Marshal(m)
		if len(raw) >= s.TargetKiB*1024 {
			break
		}
		s.grow(v, m, n)
	}
	growCounts.Store(s.Name, n)
	return n
}

// GPUStackBundle is LayeredBundle's dependency shape (n components in layers of width, each
// above the first depending on up to three below) with GPU-stack values: component i follows
// GPUStackShapes()[i % 10] and the system placement at that shape's paths. The result is the
// same on every call and passes Bundle.Validate.
func GPUStackBundle(n, width int) *plan.Bundle {
	b := LayeredBundle(n, width)
	b.Metadata.Name = "gpu-stack-bench"
	shapes := GPUStackShapes()
	for i := range b.Components {
		s := shapes[i%len(shapes)]
		c := &b.Components[i]
		c.Values = GPUStackValues(s, i)
		c.Placement = &plan.ComponentPlacement{Class: plan.PlacementSystem, NodeSelectorPaths: []string{s.NodeSelectorPath}, TolerationsPaths: []string{s.TolerationsPath}}
	}
	return b
}

// valueGen writes the building blocks of chart values for release i.
type valueGen struct {
	i     int
	chart string
}

func (v *valueGen) version(major int) string {
	return fmt.Sprintf("v%d.%d.%d", major, v.i%17, v.i%5)
}

func (v *valueGen) image(repo, name string) map[string]any {
	return map[string]any{"repository": repo + "/" + name, "tag": v.version(1), "pullPolicy": "IfNotPresent"}
}

func resources(cpu, mem string) map[string]any {
	return map[string]any{"limits": map[string]any{"cpu": cpu, "memory": mem}, "requests": map[string]any{"cpu": "100m", "memory": "128Mi"}}
}

func probe(path string, port int) map[string]any {
	return map[string]any{"httpGet": map[string]any{"path": path, "port": port}, "initialDelaySeconds": 15, "periodSeconds": 20, "failureThreshold": 3, "timeoutSeconds": 5}
}

func securityContext() map[string]any {
	return map[string]any{"runAsNonRoot": true, "runAsUser": 65532, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
		"capabilities": map[string]any{"drop": []any{"ALL"}}, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}
}

func scheduling() map[string]any {
	return map[string]any{
		"nodeSelector": map[string]any{},
		"tolerations":  []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}},
		"affinity": map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
			"weight": 1, "preference": map[string]any{"matchExpressions": []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "In", "values": []any{""}}}}}}}},
	}
}

// workload is the block a chart has for each of its controllers or node agents.
func (v *valueGen) workload(repo, name string, port int) map[string]any {
	m := map[string]any{
		"enabled": true, "repository": repo, "image": name, "version": v.version(2), "imagePullPolicy": "IfNotPresent", "imagePullSecrets": []any{},
		"replicas": 1 + v.i%3, "priorityClassName": "system-node-critical",
		"env":       []any{envVar(v, 0), envVar(v, 1)},
		"args":      []any{"--metrics-bind-address=:" + fmt.Sprint(port), "--leader-elect"},
		"resources": resources("500m", "512Mi"), "securityContext": securityContext(),
		"livenessProbe": probe("/healthz", port), "readinessProbe": probe("/readyz", port),
		"podAnnotations": map[string]any{}, "podLabels": map[string]any{"app.kubernetes.io/part-of": v.chart},
		"updateStrategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "1"}},
		"serviceMonitor": map[string]any{"enabled": false, "interval": "15s", "honorLabels": false, "additionalLabels": map[string]any{}, "relabelings": []any{}},
	}
	for k, x := range scheduling() {
		m[k] = x
	}
	return m
}

func envVar(v *valueGen, k int) any {
	return map[string]any{"name": fmt.Sprintf("%s_SETTING_%03d", "NVIDIA", k), "value": fmt.Sprintf("%s-%d-%d", v.chart, v.i, k)}
}

func flagArg(v *valueGen, k int) any {
	return fmt.Sprintf("--%s-option-%03d=%d", v.chart, k, v.i+k)
}

func scrapeConfig(v *valueGen, k int) any {
	return map[string]any{
		"job_name": fmt.Sprintf("gpu-nodes-%03d", k), "scrape_interval": "30s", "metrics_path": "/metrics", "scheme": "https",
		"kubernetes_sd_configs": []any{map[string]any{"role": "endpoints", "namespaces": map[string]any{"names": []any{"gpu-operator"}}}},
		"relabel_configs": []any{
			map[string]any{"source_labels": []any{"__meta_kubernetes_service_label_app"}, "regex": "nvidia-dcgm-exporter", "action": "keep"},
			map[string]any{"source_labels": []any{"__meta_kubernetes_pod_node_name"}, "target_label": "node", "action": "replace"},
		},
		"tls_config": map[string]any{"insecure_skip_verify": false, "ca_file": "/etc/prometheus/secrets/ca.crt"},
	}
}

func quarantineRule(v *valueGen, k int) any {
	return map[string]any{
		"version": "1", "name": fmt.Sprintf("GPU fatal error %03d", k), "priority": 10 + k,
		"match": map[string]any{"all": []any{
			map[string]any{"kind": "HealthEvent", "expression": fmt.Sprintf("event.agent == 'gpu-health-monitor' && event.errorCode == '%d'", 40+k)},
			map[string]any{"kind": "Node", "expression": "!('k8saas.nvidia.com/ManagedByNVSentinel' in node.metadata.labels)"},
		}},
		"cordon": map[string]any{"shouldCordon": true}, "taint": map[string]any{"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"},
	}
}

// growList returns a grow step that appends item(k) to the list at section.key(.sub), creating
// it as needed (an empty key means the section itself is the list).
func growList(section, key, sub string, item func(*valueGen, int) any) func(*valueGen, map[string]any, int) {
	return func(v *valueGen, m map[string]any, k int) {
		path := []string{section}
		if key != "" {
			path = append(path, key)
		}
		if sub != "" {
			path = append(path, splitDots(sub)...)
		}
		parent := m
		for _, p := range path[:len(path)-1] {
			next, ok := parent[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				parent[p] = next
			}
			parent = next
		}
		last := path[len(path)-1]
		list, _ := parent[last].([]any)
		parent[last] = append(list, item(v, k))
	}
}

func splitDots(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func kubePrometheusStack(v *valueGen) map[string]any {
	rules := map[string]any{}
	for _, r := range []string{"alertmanager", "etcd", "configReloaders", "general", "k8sContainerCpuUsageSecondsTotal", "k8sContainerMemoryCache",
		"k8sPodOwner", "kubeApiserverAvailability", "kubeApiserverBurnrate", "kubelet", "kubeStateMetrics", "network", "node", "nodeExporterAlerting",
		"prometheus", "prometheusOperator", "windows"} {
		rules[r] = true
	}
	return map[string]any{
		"nameOverride": "", "fullnameOverride": "", "commonLabels": map[string]any{},
		"crds":         map[string]any{"enabled": true, "upgradeJob": map[string]any{"enabled": false}},
		"defaultRules": map[string]any{"create": true, "rules": rules, "appNamespacesTarget": ".*", "labels": map[string]any{}, "annotations": map[string]any{}},
		"global":       map[string]any{"rbac": map[string]any{"create": true}, "imageRegistry": "", "imagePullSecrets": []any{}},
		"alertmanager": map[string]any{"enabled": true, "config": map[string]any{
			"global": map[string]any{"resolve_timeout": "5m"}, "inhibit_rules": []any{map[string]any{"source_matchers": []any{"severity = critical"}, "target_matchers": []any{"severity =~ warning|info"}, "equal": []any{"namespace", "alertname"}}},
			"route":     map[string]any{"group_by": []any{"namespace"}, "group_wait": "30s", "group_interval": "5m", "repeat_interval": "12h", "receiver": "null"},
			"receivers": []any{map[string]any{"name": "null"}}},
			"alertmanagerSpec": map[string]any{"image": v.image("quay.io", "prometheus/alertmanager"), "replicas": 1, "retention": "120h", "resources": resources("200m", "256Mi"), "securityContext": securityContext()}},
		"grafana":                  map[string]any{"enabled": true, "defaultDashboardsEnabled": true, "adminPassword": "", "sidecar": map[string]any{"dashboards": map[string]any{"enabled": true, "label": "grafana_dashboard"}, "datasources": map[string]any{"enabled": true}}},
		"kubeApiServer":            map[string]any{"enabled": true, "serviceMonitor": map[string]any{"interval": "", "relabelings": []any{}, "metricRelabelings": []any{}}},
		"kubelet":                  map[string]any{"enabled": true, "namespace": "kube-system", "serviceMonitor": map[string]any{"https": true, "cAdvisor": true, "probes": true, "resource": false}},
		"kubeControllerManager":    map[string]any{"enabled": true, "service": map[string]any{"port": 10257}},
		"coreDns":                  map[string]any{"enabled": true, "service": map[string]any{"port": 9153}},
		"kubeEtcd":                 map[string]any{"enabled": true, "service": map[string]any{"port": 2381}},
		"kubeScheduler":            map[string]any{"enabled": true, "service": map[string]any{"port": 10259}},
		"kubeProxy":                map[string]any{"enabled": true, "service": map[string]any{"port": 10249}},
		"kubeStateMetrics":         map[string]any{"enabled": true},
		"kube-state-metrics":       v.workload("registry.k8s.io", "kube-state-metrics/kube-state-metrics", 8080),
		"nodeExporter":             map[string]any{"enabled": true, "operatingSystems": map[string]any{"linux": map[string]any{"enabled": true}}},
		"prometheus-node-exporter": v.workload("quay.io", "prometheus/node-exporter", 9100),
		"prometheusOperator":       v.workload("quay.io", "prometheus-operator/prometheus-operator", 8080),
		"prometheus": map[string]any{"enabled": true, "prometheusSpec": map[string]any{
			"image": v.image("quay.io", "prometheus/prometheus"), "replicas": 1, "retention": "10d", "retentionSize": "", "scrapeInterval": "30s",
			"evaluationInterval": "30s", "resources": resources("2", "4Gi"), "securityContext": securityContext(),
			"serviceMonitorSelectorNilUsesHelmValues": false, "podMonitorSelectorNilUsesHelmValues": false, "ruleSelectorNilUsesHelmValues": false,
			"storageSpec":             map[string]any{"volumeClaimTemplate": map[string]any{"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "50Gi"}}}}},
			"additionalScrapeConfigs": []any{}}},
		"thanosRuler": map[string]any{"enabled": false},
	}
}

func gpuOperator(v *valueGen) map[string]any {
	m := map[string]any{
		"platform":         map[string]any{"openshift": false},
		"nfd":              map[string]any{"enabled": true, "nodefeaturerules": false},
		"psa":              map[string]any{"enabled": false},
		"cdi":              map[string]any{"enabled": true, "default": false},
		"sandboxWorkloads": map[string]any{"enabled": false, "defaultWorkload": "container"},
		"hostPaths":        map[string]any{"rootFS": "/", "driverInstallDir": "/run/nvidia/driver"},
		"daemonsets":       map[string]any{"labels": map[string]any{}, "annotations": map[string]any{}, "priorityClassName": "system-node-critical", "tolerations": []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}, "updateStrategy": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "1"}},
		"operator":         v.workload("nvcr.io/nvidia", "gpu-operator", 8080),
		"mig":              map[string]any{"strategy": "single"},
		"node-feature-discovery": map[string]any{"enableNodeFeatureApi": true, "priorityClassName": "system-node-critical",
			"gc": map[string]any{"enable": true, "replicaCount": 1}, "worker": v.workload("registry.k8s.io", "nfd/node-feature-discovery", 8081), "master": v.workload("registry.k8s.io", "nfd/node-feature-discovery", 8081)},
	}
	for _, c := range []string{"validator", "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager", "nodeStatusExporter", "gds", "gdrcopy",
		"vgpuManager", "vgpuDeviceManager", "vfioManager", "kataManager", "sandboxDevicePlugin", "ccManager"} {
		m[c] = v.workload("nvcr.io/nvidia/cloud-native", c, 8000)
	}
	d := m["driver"].(map[string]any)
	d["version"] = fmt.Sprintf("580.%d.%02d", 95+v.i%10, v.i%100)
	d["useOpenKernelModules"], d["usePrecompiled"], d["kernelModuleConfig"] = true, false, map[string]any{"name": ""}
	d["upgradePolicy"] = map[string]any{"autoUpgrade": true, "maxParallelUpgrades": 1, "maxUnavailable": "25%", "waitForCompletion": map[string]any{"timeoutSeconds": 0},
		"podDeletion": map[string]any{"force": false, "timeoutSeconds": 300, "deleteEmptyDir": false}, "drain": map[string]any{"enable": false, "force": false, "timeoutSeconds": 300}}
	d["manager"] = map[string]any{"image": "k8s-driver-manager", "repository": "nvcr.io/nvidia/cloud-native", "version": v.version(0), "env": []any{envVar(v, 10), envVar(v, 11)}}
	return m
}

func networkOperator(v *valueGen) map[string]any {
	m := map[string]any{
		"nfd":                  map[string]any{"enabled": true, "deployNodeFeatureRules": true},
		"upgradeCRDs":          true,
		"sriovNetworkOperator": map[string]any{"enabled": false, "configDaemonNodeSelectorExtra": []any{}},
		"operator":             v.workload("nvcr.io/nvidia/cloud-native", "network-operator", 8080),
		"imagePullSecrets":     []any{},
		"deployCR":             false,
	}
	for _, c := range []string{"ofedDriver", "rdmaSharedDevicePlugin", "sriovDevicePlugin", "ibKubernetes", "nvIpam", "secondaryNetwork", "nicFeatureDiscovery", "docaTelemetryService"} {
		m[c] = v.workload("nvcr.io/nvidia/mellanox", c, 8000)
	}
	return m
}

func nvsentinel(v *valueGen) map[string]any {
	m := map[string]any{"global": map[string]any{"image": map[string]any{"tag": v.version(0)}, "dryRun": false, "metricsPort": 2112,
		"nodeSelector": map[string]any{}, "tolerations": []any{}, "affinity": map[string]any{}, "systemNodeSelector": map[string]any{}, "systemNodeTolerations": []any{}, "imagePullSecrets": []any{}}}
	for _, c := range []string{"gpu-health-monitor", "syslog-health-monitor", "platform-connectors", "fault-quarantine", "node-drainer", "fault-remediation", "labeler"} {
		w := v.workload("ghcr.io/nvidia/nvsentinel", c, 2112)
		w["logLevel"] = "info"
		m[c] = w
	}
	m["node-drainer"].(map[string]any)["systemNamespaces"] = "^(nvsentinel|kube-system|gpu-operator|network-operator)$"
	return m
}

func certManager(v *valueGen) map[string]any {
	m := v.workload("quay.io/jetstack", "cert-manager-controller", 9402)
	m["global"] = map[string]any{"leaderElection": map[string]any{"namespace": "kube-system"}, "priorityClassName": ""}
	m["crds"] = map[string]any{"enabled": true, "keep": true}
	m["extraArgs"] = []any{}
	m["webhook"] = v.workload("quay.io/jetstack", "cert-manager-webhook", 10250)
	m["cainjector"] = v.workload("quay.io/jetstack", "cert-manager-cainjector", 9402)
	m["startupapicheck"] = map[string]any{"enabled": true, "timeout": "1m", "backoffLimit": 4}
	return m
}

func skyhook(v *valueGen) map[string]any {
	cm := v.workload("nvcr.io/nvidia/skyhook", "operator", 8080)
	cm["selectors"] = map[string]any{}
	cm["manager"] = map[string]any{"env": []any{envVar(v, 0)}}
	return map[string]any{"controllerManager": cm, "webhook": map[string]any{"enable": true}, "removal": map[string]any{"enable": true}}
}

func nodeFeatureDiscovery(v *valueGen) map[string]any {
	w := v.workload("registry.k8s.io/nfd", "node-feature-discovery", 8081)
	w["config"] = map[string]any{"sources": map[string]any{"pci": map[string]any{"deviceClassWhitelist": []any{"02", "03", "0200", "0207"}, "deviceLabelFields": []any{"vendor"}}}}
	return map[string]any{"enableNodeFeatureApi": true, "master": map[string]any{"replicaCount": 1, "nodeSelector": map[string]any{}, "tolerations": []any{}}, "worker": w}
}

func dcgmExporter(v *valueGen) map[string]any {
	m := v.workload("nvcr.io/nvidia/k8s", "dcgm-exporter", 9400)
	m["extraEnv"] = []any{}
	m["arguments"] = []any{"-f", "/etc/dcgm-exporter/dcp-metrics-included.csv"}
	return m
}

func jobset(v *valueGen) map[string]any {
	c := v.workload("registry.k8s.io/jobset", "jobset", 8443)
	return map[string]any{"controller": c, "certManager": map[string]any{"enable": false}}
}

func kubeflowTrainer(v *valueGen) map[string]any {
	return map[string]any{"manager": v.workload("ghcr.io/kubeflow/trainer", "trainer-controller-manager", 8080), "jobset": map[string]any{"install": false}}
}
