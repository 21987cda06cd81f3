{{- /*
KubeRay's chart values (helm-chart/kuberay-operator/values.yaml, v1.7.0), read by this chart so a
KubeRay user's values file installs it unchanged (docs/install.md, "KubeRay's Helm values").
Each helper below gives the effective setting from our value and KubeRay's; the templates use
these helpers, never the raw values they combine.
*/}}

{{/* Non-empty with singleNamespaceInstall: Roles and RoleBindings only, no cluster-scoped grant. */}}
{{- define "rayquota.singleNamespace" -}}
{{- if .Values.singleNamespaceInstall -}}true{{- end -}}
{{- end -}}

{{/* The managed namespaces, as JSON (fromJsonArray): watchNamespaces and KubeRay's
watchNamespace; a namespace-only install with neither manages the release's namespace. */}}
{{- define "rayquota.watchNamespaces" -}}
{{- $names := concat (.Values.watchNamespaces | default list) (.Values.watchNamespace | default list) | uniq -}}
{{- if and (not $names) .Values.singleNamespaceInstall -}}
{{- $names = list .Release.Namespace -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/* Non-empty when the queue integration runs: it reads cluster-scoped objects (ClusterQueues,
ResourceFlavors, Namespaces), which a namespace-only install may not. */}}
{{- define "rayquota.queueEnabled" -}}
{{- if not .Values.singleNamespaceInstall -}}true{{- end -}}
{{- end -}}

{{/* Non-empty when the chart installs the admission webhooks (cluster-scoped configurations). */}}
{{- define "rayquota.webhooksEnabled" -}}
{{- if and .Values.webhooks.enabled (include "rayquota.queueEnabled" .) -}}true{{- end -}}
{{- end -}}

{{- define "rayquota.leaderElection" -}}
{{- $kuberay := ternary .Values.leaderElectionEnabled true (hasKey .Values "leaderElectionEnabled") -}}
{{- if and .Values.leaderElection.enabled $kuberay -}}true{{- end -}}
{{- end -}}

{{- define "rayquota.rbacCreate" -}}
{{- $kuberay := ternary .Values.rbacEnable true (hasKey .Values "rbacEnable") -}}
{{- if and .Values.rbac.create $kuberay -}}true{{- end -}}
{{- end -}}

{{/* KubeRay's crNamespacedRbacEnable (default true): in a namespace-only install, whether the
chart creates the Role and RoleBinding in each managed namespace (false: GitOps creates them). */}}
{{- define "rayquota.namespacedRoles" -}}
{{- if ternary .Values.crNamespacedRbacEnable true (hasKey .Values "crNamespacedRbacEnable") -}}true{{- end -}}
{{- end -}}

{{/* The image: KubeRay's operator image (a values file written for KubeRay names it) cannot run
rayquota, so this chart's own image (Chart.yaml's annotation) stands in for it. */}}
{{- define "rayquota.image" -}}
{{- $default := index .Chart.Annotations "rayquota.io/image-repository" -}}
{{- $repository := .Values.image.repository | default $default -}}
{{- $tag := .Values.image.tag -}}
{{- if regexMatch "(^|/)kuberay/operator$" $repository -}}
{{- $repository = $default -}}
{{- $tag = "" -}}
{{- end -}}
{{ $repository }}:{{ default .Chart.AppVersion $tag }}
{{- end -}}

{{/* Non-empty when image.repository names KubeRay's operator (NOTES says what ran instead). */}}
{{- define "rayquota.kuberayImageReplaced" -}}
{{- if regexMatch "(^|/)kuberay/operator$" .Values.image.repository -}}true{{- end -}}
{{- end -}}

{{/* KubeRay's featureGates as the operator's --feature-gates string, refusing (with the gate's
name) what rayquota cannot honour: the same table as rayquota/operator/feature_gates.py, which
a test renders the chart against gate by gate. */}}
{{- define "rayquota.featureGates" -}}
{{- $alwaysOn := list "RayClusterStatusConditions" "RayJobDeletionPolicy" "RayMultiHostIndexing" "RayServiceIncrementalUpgrade" -}}
{{- $switches := list "RayCronJob" "RayClusterNetworkPolicy" -}}
{{- $notImplemented := list "SidecarSubmitterRestart" "GCSFaultToleranceEmbeddedStorage" "RayClusterMTLS" "RayClusterHistoryServer" "KubernetesWAS" -}}
{{- $set := list -}}
{{- range .Values.featureGates -}}
{{- if has .name $alwaysOn -}}
{{- if not .enabled -}}
{{- fail (printf "featureGates: %s=false is refused: rayquota always runs this feature and cannot turn it off (remove the entry or set enabled: true)" .name) -}}
{{- end -}}
{{- else if has .name $notImplemented -}}
{{- if .enabled -}}
{{- fail (printf "featureGates: %s=true is refused: rayquota does not implement this KubeRay feature (docs/kuberay-compatibility.md)" .name) -}}
{{- end -}}
{{- else if not (has .name $switches) -}}
{{- fail (printf "featureGates: unknown feature gate %q (KubeRay v1.7.0's gates: %s)" .name (join ", " (concat $alwaysOn $switches $notImplemented | sortAlpha))) -}}
{{- end -}}
{{- $set = append $set (printf "%s=%t" .name .enabled) -}}
{{- end -}}
{{- join "," $set -}}
{{- end -}}

{{/* Non-empty when the RayCronJob controller runs (KubeRay's gate; on unless set to false). */}}
{{- define "rayquota.rayCronJobEnabled" -}}
{{- $enabled := true -}}
{{- range .Values.featureGates -}}
{{- if eq .name "RayCronJob" -}}{{- $enabled = .enabled -}}{{- end -}}
{{- end -}}
{{- if and .Values.reconcilers.enabled $enabled -}}true{{- end -}}
{{- end -}}

{{/* Non-empty when the NetworkPolicy controller runs (KubeRay's gate; off unless set to true). */}}
{{- define "rayquota.networkPolicyEnabled" -}}
{{- $enabled := false -}}
{{- range .Values.featureGates -}}
{{- if eq .name "RayClusterNetworkPolicy" -}}{{- $enabled = .enabled -}}{{- end -}}
{{- end -}}
{{- if and .Values.reconcilers.enabled $enabled -}}true{{- end -}}
{{- end -}}

{{/* Non-empty when enableIngress makes OpenShift Routes: an OpenShift API server (the operator
looks at its API groups at start-up) and USE_INGRESS_ON_OPENSHIFT not true in `env`. */}}
{{- define "rayquota.openShiftRoutes" -}}
{{- $ingress := false -}}
{{- range .Values.env -}}
{{- if and (eq .name "USE_INGRESS_ON_OPENSHIFT") (eq (lower (toString .value)) "true") -}}{{- $ingress = true -}}{{- end -}}
{{- end -}}
{{- $caps := .Capabilities.APIVersions -}}
{{- $openshift := or ($caps.Has "route.openshift.io/v1") ($caps.Has "security.openshift.io/v1") ($caps.Has "config.openshift.io/v1") -}}
{{- if and .Values.reconcilers.enabled $openshift (not $ingress) -}}true{{- end -}}
{{- end -}}

{{/* KubeRay values rayquota cannot honour are refused here, by name, at install. */}}
{{- define "rayquota.refuseKubeRayValues" -}}
{{- with .Values.batchScheduler -}}
{{- if or .enabled (and .name (ne .name "default")) -}}
{{- fail (printf "batchScheduler: %s is refused: rayquota admits Ray workloads itself (gang admission of every pod set) and does not hand them to another batch scheduler" (ternary "enabled: true" (printf "name: %s" .name) (not (empty .enabled)))) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.configuration .Values.configuration.enabled -}}
{{- fail "configuration.enabled: true is refused: rayquota reads no KubeRay configuration file (its defaultContainerEnvs, defaultPodAnnotations, defaultPodLabels and sidecar containers are not implemented)" -}}
{{- end -}}
{{- if .Values.useKubernetesProxy -}}
{{- fail "useKubernetesProxy: true is refused: rayquota reaches Ray dashboards through the head Service, not through the API server's proxy" -}}
{{- end -}}
{{- with .Values.logging -}}
{{- if or .baseDir .fileName -}}
{{- fail "logging.baseDir / logging.fileName are refused: rayquota logs to standard output only" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.singleNamespaceInstall .Values.kueueApi.enabled -}}
{{- fail "singleNamespaceInstall with kueueApi.enabled is refused: the queue integration reads cluster-scoped objects (ClusterQueues, ResourceFlavors), which a namespace-only install may not" -}}
{{- end -}}
{{- if and .Values.singleNamespaceInstall (not .Values.reconcilers.enabled) -}}
{{- fail "singleNamespaceInstall with reconcilers.enabled=false is refused: a namespace-only install runs the Ray reconcilers alone (no queue), so admission-only mode would leave it nothing to do" -}}
{{- end -}}
{{- end -}}

{{/* The container's log format: KubeRay's logging.stdoutEncoder (json or console). */}}
{{- define "rayquota.logFormat" -}}
{{- $encoder := "" -}}
{{- with .Values.logging -}}{{- $encoder = .stdoutEncoder | default "" -}}{{- end -}}
{{- ternary "json" "text" (eq $encoder "json") -}}
{{- end -}}
