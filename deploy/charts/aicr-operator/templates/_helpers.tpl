{{/*
Names. Every object is "<fullname>-<part>"; the release is normally "aicr-operator", so objects read
aicr-operator-planner, aicr-operator-nats, ...
*/}}
{{- define "aicr.fullname" -}}
{{- $name := include "aicr.name" . -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The chart's name: nameOverride, or the chart's. */}}
{{- define "aicr.name" -}}{{ default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" }}{{- end -}}

{{/* The five binaries, in a fixed order. */}}
{{- define "aicr.binaries" -}}planner applier readiness credrefresher admission{{- end -}}

{{/* Binaries that elect a leader on a Lease named aicr-<binary> (servicekit/service RunLeader). */}}
{{- define "aicr.leaderBinaries" -}}planner readiness credrefresher{{- end -}}

{{- define "aicr.labels" -}}
app.kubernetes.io/name: {{ include "aicr.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: aicr-operator
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: dict "root" $ "component" "planner" */}}
{{- define "aicr.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aicr.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "aicr.componentLabels" -}}
{{ include "aicr.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* ServiceAccount name of a binary: dict "root" $ "component" "planner" */}}
{{- define "aicr.serviceAccount" -}}
{{- $sa := (index .root.Values .component).serviceAccount -}}
{{- default (printf "%s-%s" (include "aicr.fullname" .root) .component) $sa.name -}}
{{- end -}}

{{/* The Kubernetes user name of a binary's ServiceAccount. */}}
{{- define "aicr.serviceAccountUser" -}}
{{- printf "system:serviceaccount:%s:%s" .root.Release.Namespace (include "aicr.serviceAccount" .) -}}
{{- end -}}

{{/* registry.auth is a mode string ("aws", "static") or a mapping with mode and repoCredsSecret. */}}
{{- define "aicr.authMode" -}}
{{- $a := .Values.registry.auth -}}
{{- if kindIs "string" $a -}}{{ $a }}{{- else -}}{{ default "static" $a.mode }}{{- end -}}
{{- end -}}

{{- define "aicr.repoCredsSecret" -}}
{{- $a := .Values.registry.auth -}}
{{- if kindIs "string" $a -}}aicr-registry{{- else -}}{{ default "aicr-registry" $a.repoCredsSecret }}{{- end -}}
{{- end -}}

{{- define "aicr.awsRegion" -}}
{{- $a := .Values.registry.auth -}}
{{- if and (kindIs "map" $a) (kindIs "map" $a.aws) -}}{{ default "" $a.aws.region }}{{- end -}}
{{- end -}}

{{/* registry.repository without a scheme or trailing slash; fails when unset. */}}
{{- define "aicr.repository" -}}
{{- $r := required "registry.repository is required: the OCI repository (host[/path], no scheme) under which charts/* and wrappers/* live, such as registry.example.com/aicr" .Values.registry.repository -}}
{{- trimSuffix "/" (trimPrefix "oci://" $r) -}}
{{- end -}}

{{/* A binary's image: <image.registry>/<binary>@<digest> with image.digests.<binary>, else
<image.registry>/<binary>:<tag>. */}}
{{- define "aicr.image" -}}
{{- $repo := printf "%s/%s" (trimSuffix "/" .root.Values.image.registry) .component -}}
{{- with index .root.Values.image.digests .component -}}
{{- printf "%s@%s" $repo . -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .root.Chart.AppVersion .root.Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The NATS servers' image: <repository>@<digest> with nats.image.digest, else
<repository>:<tag>. */}}
{{- define "aicr.natsImage" -}}
{{- with .Values.nats.image -}}
{{- if .digest -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "aicr.natsName" -}}{{ include "aicr.fullname" . }}-nats{{- end -}}

{{- define "aicr.natsTLSSecret" -}}{{ default (printf "%s-tls" (include "aicr.natsName" .)) .Values.nats.tls.existingSecret }}{{- end -}}

{{/* The Secret of the NATS passwords and their bcrypt hashes: yours (nats.auth.existingSecret) or
the one the setup Job creates. */}}
{{- define "aicr.natsAuthSecret" -}}{{ default (printf "%s-nats-auth" (include "aicr.fullname" .)) .Values.nats.auth.existingSecret }}{{- end -}}

{{/* The environment variable holding a NATS user's bcrypt hash (nats.conf reads it). */}}
{{- define "aicr.natsHashEnv" -}}{{ upper . }}_PASSWORD_HASH{{- end -}}

{{/* The Secret whose ca.crt the binaries trust for NATS (--nats-tls-ca); empty: none. */}}
{{- define "aicr.natsCASecret" -}}
{{- if .Values.nats.enabled -}}
{{- if .Values.nats.tls.enabled }}{{ include "aicr.natsTLSSecret" . }}{{ end -}}
{{- else -}}
{{- .Values.nats.tls.caSecret -}}
{{- end -}}
{{- end -}}

{{- define "aicr.natsURL" -}}
{{- if .Values.nats.enabled -}}
{{- printf "%s://%s.%s.svc:4222" (ternary "tls" "nats" .Values.nats.tls.enabled) (include "aicr.natsName" .) .Release.Namespace -}}
{{- else -}}
{{- required "nats.url is required when nats.enabled is false" .Values.nats.url -}}
{{- end -}}
{{- end -}}

{{/* JetStream replication of the operator's streams: 1, 3 or 5 (servicekit/service --stream-replicas). */}}
{{- define "aicr.streamReplicas" -}}
{{- if and .Values.nats.enabled (ge (int .Values.nats.replicas) 3) -}}{{ int .Values.nats.replicas }}{{- else -}}1{{- end -}}
{{- end -}}

{{- define "aicr.webhookService" -}}{{ include "aicr.fullname" . }}-admission{{- end -}}
{{- define "aicr.webhookSecret" -}}{{ default (printf "%s-admission-tls" (include "aicr.fullname" .)) .Values.admission.tls.existingSecret }}{{- end -}}

{{/* Argo CD: objects kept on uninstall (helm.sh/resource-policy: keep) are never pruned either. */}}
{{- define "aicr.keepAnnotations" -}}
helm.sh/resource-policy: keep
argocd.argoproj.io/sync-options: Prune=false
{{- end -}}

{{/* Container security context of every container (containerSecurityContext; by default
non-root, read-only, nothing extra). */}}
{{- define "aicr.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- end -}}

{{- define "aicr.podScheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The operator's identities, comma-separated: whose writes the webhook holds to the operator rules. */}}
{{- define "aicr.operatorIdentities" -}}
{{- $ids := list -}}
{{- range $b := splitList " " (include "aicr.binaries" .) -}}
{{- $ids = append $ids (include "aicr.serviceAccountUser" (dict "root" $ "component" $b)) -}}
{{- end -}}
{{- join "," $ids -}}
{{- end -}}

{{/* The operator's identities as a CEL list body: 'a', 'b', ... */}}
{{- define "aicr.operatorIdentitiesCEL" -}}
{{- $ids := list -}}
{{- range $b := splitList " " (include "aicr.binaries" .) -}}
{{- $ids = append $ids (printf "'%s'" (include "aicr.serviceAccountUser" (dict "root" $ "component" $b))) -}}
{{- end -}}
{{- join ", " $ids -}}
{{- end -}}

{{/*
What the cluster offers, from .Capabilities.APIVersions (helm install and upgrade ask the API
server; Argo CD passes the destination's API versions to helm template). A first install on a fresh
cluster has neither cert-manager nor the Prometheus Operator: the operator's own stack installs
them. So certManager.enabled issues the certificates with cert-manager only once its API is
served (until then the setup Job issues them), and the ServiceMonitors and the PrometheusRule are
rendered only where their API is; the next upgrade or sync after the stack is up renders them
(docs/install.md, "After the stack is up"). Each is "true" or empty.
*/}}
{{- define "aicr.certManager" -}}
{{- if and .Values.certManager.enabled (.Capabilities.APIVersions.Has "cert-manager.io/v1") }}true{{ end -}}
{{- end -}}
{{- define "aicr.monitoringAPI" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}true{{ end -}}
{{- end -}}
