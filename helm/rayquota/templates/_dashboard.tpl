{{/* The dashboard served by the operator (dashboard.enabled): its port, included by
deployment.yaml (its settings are in the configuration, configmap.yaml). Only the leader serves it, like everything else. */}}
{{- define "rayquota.dashboardPorts" -}}
{{- if .Values.dashboard.enabled -}}
- {name: dashboard, containerPort: {{ .Values.dashboard.port }}}
{{- end -}}
{{- end -}}

{{- define "rayquota.dashboardName" -}}
{{ include "rayquota.fullname" . }}-dashboard
{{- end -}}
