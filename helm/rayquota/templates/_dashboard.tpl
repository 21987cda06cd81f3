{{/* The dashboard served by the operator (dashboard.enabled): its container env and port,
included by deployment.yaml. Only the leader serves it, like everything else. */}}
{{- define "rayquota.dashboardEnv" -}}
{{- if .Values.dashboard.enabled -}}
- name: RAYQUOTA_DASHBOARD_PORT
  value: {{ .Values.dashboard.port | quote }}
# The Service reaches it on the pod's address; every request still needs a bearer token.
- name: RAYQUOTA_DASHBOARD_BIND_ADDRESS
  value: "0.0.0.0"
{{- with .Values.dashboard.allowedOrigins }}
- name: RAYQUOTA_DASHBOARD_ALLOWED_ORIGINS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.dashboard.prometheusUrl }}
- name: RAYQUOTA_DASHBOARD_PROMETHEUS_URL
  value: {{ . | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{- define "rayquota.dashboardPorts" -}}
{{- if .Values.dashboard.enabled -}}
- {name: dashboard, containerPort: {{ .Values.dashboard.port }}}
{{- end -}}
{{- end -}}

{{- define "rayquota.dashboardName" -}}
{{ include "rayquota.fullname" . }}-dashboard
{{- end -}}
