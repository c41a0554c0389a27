{{/*
Topology spread of a binary running more than one replica (topologySpread): one constraint per
key, so replicas land on different nodes and zones when they can. dict "root" $ "component" "applier"
*/}}
{{- define "aicr.topologySpread" -}}
{{- $v := index .root.Values .component -}}
{{- if and .root.Values.topologySpread.enabled (gt (int $v.replicas) 1) }}
topologySpreadConstraints:
{{- range .root.Values.topologySpread.topologyKeys }}
  - maxSkew: 1
    topologyKey: {{ . }}
    whenUnsatisfiable: {{ $.root.Values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels: {{- include "aicr.selectorLabels" $ | nindent 8 }}
{{- end }}
{{- end }}
{{- end -}}
