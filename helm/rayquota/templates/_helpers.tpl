{{- /* nameOverride and fullnameOverride as Helm charts (KubeRay's among them) usually read them. */}}
{{- define "rayquota.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "rayquota.fullname" -}}
{{- $name := include "rayquota.name" . -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}{{- else if contains $name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "rayquota.labels" -}}
app.kubernetes.io/name: {{ include "rayquota.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "rayquota.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rayquota.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rayquota.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "rayquota.fullname" .) .Values.serviceAccount.name }}{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{/* Non-empty when the operator issues its own webhook certificate and patches the caBundle. */}}
{{- define "rayquota.selfSignedWebhookCerts" -}}
{{- if and (include "rayquota.webhooksEnabled" .) (not .Values.webhooks.certManager.enabled) (not .Values.webhooks.caBundle) -}}true{{- end -}}
{{- end -}}

{{- define "rayquota.certSecretName" -}}
{{ include "rayquota.fullname" . }}-webhook-cert
{{- end -}}

{{- define "rayquota.webhookServiceName" -}}
{{ include "rayquota.fullname" . }}-webhook
{{- end -}}

{{- define "rayquota.webhookAnnotations" -}}
{{- if .Values.webhooks.certManager.enabled -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "rayquota.webhookServiceName" . }}
{{- end -}}
{{- end -}}

{{/* (list $ path): the Service, or webhooks.url for an operator run outside the cluster. */}}
{{- define "rayquota.webhookClientConfig" -}}
{{- $ := index . 0 }}{{ $path := index . 1 -}}
clientConfig:
  {{- if $.Values.webhooks.url }}
  url: {{ printf "%s%s" (trimSuffix "/" $.Values.webhooks.url) $path | quote }}
  {{- else }}
  service:
    name: {{ include "rayquota.webhookServiceName" $ }}
    namespace: {{ $.Release.Namespace }}
    path: {{ $path }}
    port: 443
  {{- end }}
  {{- with $.Values.webhooks.caBundle }}
  caBundle: {{ . }}
  {{- end }}
{{- end -}}

{{/* (list $ objectSelector namespaceSelector) */}}
{{- define "rayquota.webhookCommon" -}}
{{- $ := index . 0 -}}
sideEffects: None
admissionReviewVersions: [v1]
matchPolicy: Equivalent
timeoutSeconds: {{ $.Values.webhooks.timeoutSeconds }}
{{- with index . 1 }}
objectSelector: {{- toYaml . | nindent 2 }}
{{- end }}
namespaceSelector: {{- toYaml (index . 2) | nindent 2 }}
{{- end -}}

{{/* Non-empty when the queue integration reads ResourceClaimTemplates (docs/dra.md): device
classes mapped to quota (the configuration's resources.deviceClassMappings, from
operatorConfiguration or kueueConfiguration) and the DRA integration not switched off
(queue.dra.integration). */}}
{{- define "rayquota.draClaimTemplates" -}}
{{- $config := include "rayquota.configuration" . | fromYaml -}}
{{- $mappings := (($config.resources | default dict).deviceClassMappings) | default list -}}
{{- $dra := (($config.queue | default dict).dra) | default dict -}}
{{- $off := and (hasKey $dra "integration") (not $dra.integration) -}}
{{- if and (include "rayquota.queueEnabled" .) $mappings (not $off) -}}true{{- end -}}
{{- end -}}
