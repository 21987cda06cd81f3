{{/* rayquota's configuration file, read once at start (`rayquota run --config`): the chart's
values as configuration keys (docs/configuration.md has the mapping), then Kueue's own
Configuration (kueueConfiguration, Kueue-API mode) over them, then operatorConfiguration over
them, key by key. The ConfigMap renders it; the RBAC reads from it what it grants (the Lease's
name, the DRA claim templates). */}}
{{- define "rayquota.configuration" -}}
{{- $fullname := include "rayquota.fullname" . }}
{{- $webhooks := include "rayquota.webhooksEnabled" . }}
{{- $config := dict "apiVersion" "config.rayquota.io/v1alpha1" "kind" "Configuration" }}
{{- $_ := set $config "namespace" .Release.Namespace }}
{{- /* Probes, metrics, webhooks and the dashboard Service reach the pod on its address. */}}
{{- $_ = set $config "bindAddress" "0.0.0.0" }}
{{- $_ = set $config "logFormat" (include "rayquota.logFormat" .) }}
{{- $_ = set $config "manageJobsWithoutQueueName" .Values.queue.manageJobsWithoutQueueName }}
{{- $queue := dict "api" (ternary "kueue" "rayquota" .Values.kueueApi.enabled) }}
{{- /* A namespace-only install may not read the cluster-scoped queue configuration. */}}
{{- $_ = set $queue "enable" (eq (include "rayquota.queueEnabled" .) "true") }}
{{- $_ = set $queue "queueLabelKeys" .Values.queue.labelKeys }}
{{- $_ = set $queue "priorityLabelKeys" .Values.queue.priorityLabelKeys }}
{{- $_ = set $config "queue" $queue }}
{{- $kuberay := dict "reconcilersEnabled" .Values.reconcilers.enabled }}
{{- /* KubeRay's featureGates (refused at install where rayquota cannot honour them) and its
metrics.enabled: the kuberay_* families beside rayquota's own. */}}
{{- $_ = set $kuberay "featureGates" (include "rayquota.featureGates" .) }}
{{- $_ = set $kuberay "metrics" (ternary .Values.metrics.enabled true (hasKey .Values.metrics "enabled")) }}
{{- $_ = set $config "kuberay" $kuberay }}
{{- with .Values.reconcileConcurrency }}
{{- /* KubeRay's reconcileConcurrency: concurrent reconciles per controller. */}}
{{- $_ = set $config "controller" (dict "workers" (int .)) }}
{{- end }}
{{- with .Values.multikueue }}
{{- if .enabled }}
{{- $_ = set $config "multiKueue" (dict "enable" true "workerLostTimeout" .workerLostTimeout "dispatcherName" .dispatcher) }}
{{- end }}
{{- end }}
{{- with .Values.fairSharing }}
{{- if .enabled }}
{{- $_ = set $config "fairSharing" (dict "enable" true "preemptionStrategies" .preemptionStrategies) }}
{{- end }}
{{- end }}
{{- with .Values.waitForPodsReady }}
{{- if .enabled }}
{{- $strategy := dict "timestamp" .requeuingStrategy.timestamp "backoffBaseSeconds" .requeuingStrategy.backoffBaseSeconds "backoffMaxSeconds" .requeuingStrategy.backoffMaxSeconds }}
{{- if not (kindIs "invalid" .requeuingStrategy.backoffLimitCount) }}
{{- $_ = set $strategy "backoffLimitCount" (int .requeuingStrategy.backoffLimitCount) }}
{{- end }}
{{- $ready := dict "timeout" .timeout "blockAdmission" .blockAdmission "requeuingStrategy" $strategy }}
{{- if not (kindIs "invalid" .recoveryTimeout) }}
{{- $_ = set $ready "recoveryTimeout" .recoveryTimeout }}
{{- end }}
{{- $_ = set $config "waitForPodsReady" $ready }}
{{- end }}
{{- end }}
{{- if $webhooks }}
{{- /* The queue integration's handlers, served for the chart's webhook configurations. */}}
{{- $webhook := dict "port" (int .Values.webhooks.port) }}
{{- if include "rayquota.selfSignedWebhookCerts" . }}
{{- /* The operator issues the serving certificate into this Secret and patches the caBundle of
the webhook configurations named here. */}}
{{- $host := printf "%s.%s.svc" (include "rayquota.webhookServiceName" .) .Release.Namespace }}
{{- $_ = set $config "internalCertManagement" (dict "enable" true "webhookSecretName" (include "rayquota.certSecretName" .) "configurations" (list $fullname) "hosts" (list $host)) }}
{{- else if .Values.webhooks.certManager.enabled }}
{{- $_ = set $webhook "certDir" "/etc/rayquota/webhook-cert" }}
{{- end }}
{{- $_ = set $config "webhook" $webhook }}
{{- end }}
{{- if and .Values.visibility.enabled (eq (include "rayquota.queueEnabled" .) "true") }}
{{- /* The pending-workloads API, named by the chart's APIServices (visibility.yaml). */}}
{{- $_ = set $config "visibility" (dict "port" (int .Values.visibility.port)) }}
{{- else }}
{{- $_ = set $config "visibility" (dict "enable" false) }}
{{- end }}
{{- with .Values.leaderElection }}
{{- $_ = set $config "leaderElection" (dict "leaseDuration" .leaseDurationSeconds "renewPeriod" .renewPeriodSeconds "retryPeriod" .retryPeriodSeconds) }}
{{- end }}
{{- with .Values.dashboard }}
{{- if .enabled }}
{{- /* The Service reaches it on the pod's address; every request still needs a bearer token. */}}
{{- $dashboard := dict "port" (int .port) "bindAddress" "0.0.0.0" "allowedOrigins" (.allowedOrigins | default list) }}
{{- with .prometheusUrl }}
{{- $_ = set $dashboard "prometheusUrl" . }}
{{- end }}
{{- $_ = set $config "dashboard" $dashboard }}
{{- end }}
{{- end }}
{{- if .Values.kueueConfiguration }}
{{- $config = include "rayquota.withKueueConfiguration" (list . $config) | fromYaml }}
{{- end }}
{{- $config = mergeOverwrite $config (deepCopy (.Values.operatorConfiguration | default dict)) }}
{{- toYaml $config }}
{{- end -}}


{{/* Kueue's own Configuration (kueueConfiguration: the YAML text of Kueue's chart's
managerConfig.controllerManagerConfigYaml, or the same as a map) merged over the chart's keys,
unchanged. It needs Kueue-API mode. The keys the chart wires (the namespace, the webhook server and
its certificate) stay the chart's: a different value there is refused, naming it. */}}
{{- define "rayquota.withKueueConfiguration" -}}
{{- $root := index . 0 -}}
{{- $config := index . 1 -}}
{{- $kueue := $root.Values.kueueConfiguration -}}
{{- if kindIs "string" $kueue -}}
{{- $kueue = fromYaml $kueue -}}
{{- if hasKey $kueue "Error" -}}
{{- fail (printf "kueueConfiguration: not a YAML mapping (%s)" $kueue.Error) -}}
{{- end -}}
{{- end -}}
{{- if ne (toString $kueue.apiVersion) "config.kueue.x-k8s.io/v1beta2" -}}
{{- fail (printf "kueueConfiguration.apiVersion: %q: expected Kueue's config.kueue.x-k8s.io/v1beta2 (rayquota's own keys go in operatorConfiguration)" (toString $kueue.apiVersion)) -}}
{{- end -}}
{{- if not $root.Values.kueueApi.enabled -}}
{{- fail "kueueConfiguration: Kueue's Configuration needs Kueue-API mode (kueueApi.enabled: true)" -}}
{{- end -}}
{{- $merged := mergeOverwrite (deepCopy $config) (deepCopy $kueue) -}}
{{- range $key := list "namespace" "webhook" "internalCertManagement" -}}
{{- if hasKey $kueue $key -}}
{{- $chart := ternary (toJson (get $config $key)) "nothing" (hasKey $config $key) -}}
{{- if ne (toJson (get $merged $key)) $chart -}}
{{- fail (printf "kueueConfiguration.%s: %s is the chart's to set (from its values: %s; docs/configuration.md): leave it out" $key (toJson (get $kueue $key)) $chart) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $merged -}}
{{- end -}}
