{{/* Names ------------------------------------------------------------------------- */}}
{{- define "observer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "observer.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "observer.agentName" -}}
{{- printf "%s-agent" (include "observer.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The agents' namespace: their own with agent.namespace.name, else the release's. */}}
{{- define "observer.agentNamespace" -}}
{{- default .Release.Namespace .Values.agent.namespace.name -}}
{{- end -}}

{{- define "observer.controllerName" -}}
{{- printf "%s-controller" (include "observer.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "observer.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels: call with (dict "ctx" $ "component" "agent") ---------------------------- */}}
{{- define "observer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "observer.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{- define "observer.labels" -}}
helm.sh/chart: {{ include "observer.chart" .ctx }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{ include "observer.podLabels" . }}
{{- end -}}

{{/* A pod template's labels: no chart or app version, so a chart upgrade that changes
nothing the pods run does not restart them (the image names the version it runs). */}}
{{- define "observer.podLabels" -}}
{{ include "observer.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: gpu-soak-observer
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Image ------------------------------------------------------------------------- */}}
{{- define "observer.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* checkov's skip annotations: call with a list of "CKV_K8S_<n>=<why>", one per check. */}}
{{- define "observer.checkovSkips" -}}
{{- $lines := list -}}
{{- range $i, $skip := . -}}
{{- $lines = append $lines (printf "checkov.io/skip%d: %s" (add1 $i) ($skip | quote)) -}}
{{- end -}}
{{- join "\n" $lines -}}
{{- end -}}

{{/* The image checks a tag cannot pass, as a JSON list: none once image.digest is set. */}}
{{- define "observer.imageSkips" -}}
{{- $skips := list -}}
{{- if not .Values.image.digest -}}
{{- $skips = append $skips "CKV_K8S_43=pulled by tag until the value image.digest is set" -}}
{{- if ne .Values.image.pullPolicy "Always" -}}
{{- $skips = append $skips "CKV_K8S_15=a tag pulled IfNotPresent until the value image.digest is set" -}}
{{- end -}}
{{- end -}}
{{- toJson $skips -}}
{{- end -}}

{{/* Service accounts ---------------------------------------------------------------- */}}
{{- define "observer.agentServiceAccount" -}}
{{- if .Values.agent.serviceAccount.create -}}
{{- default (include "observer.agentName" .) .Values.agent.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.agent.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "observer.controllerServiceAccount" -}}
{{- if .Values.controller.serviceAccount.create -}}
{{- default (include "observer.controllerName" .) .Values.controller.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.controller.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Settings the chart reads ---------------------------------------------------------- */}}
{{- define "observer.agentPort" -}}
{{- (dig "agent" "listen_port" 9400 .Values.settings) | int -}}
{{- end -}}

{{/* The agent's metrics-only port; "" when unset (/metrics on its listen_port). */}}
{{- define "observer.agentMetricsPort" -}}
{{- with (dig "agent" "metrics_port" nil .Values.settings) -}}{{- . | int -}}{{- end -}}
{{- end -}}

{{/* The container port Prometheus scrapes, by component: call with (dict "ctx" $ "component" "agent"). */}}
{{- define "observer.scrapePortName" -}}
{{- if and (eq .component "agent") (include "observer.agentMetricsPort" .ctx) -}}metrics{{- else -}}http{{- end -}}
{{- end -}}

{{- define "observer.controllerPort" -}}
{{- (dig "controller" "listen_port" 9401 .Values.settings) | int -}}
{{- end -}}

{{- define "observer.backend" -}}
{{- dig "controller" "backend" "simulated" .Values.settings -}}
{{- end -}}

{{/* True ("true") when the controller talks to the Kubernetes API. */}}
{{- define "observer.usesKubernetes" -}}
{{- if and .Values.controller.enabled (eq (include "observer.backend" .) "kubernetes") -}}true{{- end -}}
{{- end -}}

{{/* The probe namespaces: every tenant's name, then controller.kubernetes.namespaces. */}}
{{- define "observer.probeNamespaces" -}}
{{- $names := list -}}
{{- range (dig "controller" "tenants" list .Values.settings) -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- range (dig "controller" "kubernetes" "namespaces" list .Values.settings) -}}
{{- $names = append $names . -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end -}}

{{- /* The inference probe's namespace: its tenant, else the first; "" when it is off. */ -}}
{{- define "observer.inferenceNamespace" -}}
{{- $inference := dig "controller" "inference" dict .Values.settings -}}
{{- if dig "enabled" false $inference -}}
{{- $namespace := dig "tenant" "" $inference -}}
{{- $tenants := dig "controller" "tenants" list .Values.settings -}}
{{- if and (not $namespace) $tenants -}}{{- $namespace = (index $tenants 0).name -}}{{- end -}}
{{- if not $namespace -}}{{- fail "settings.controller.inference.tenant: no tenant to run the service as" -}}{{- end -}}
{{- $namespace -}}
{{- end -}}
{{- end -}}

{{- define "observer.usesPostgres" -}}
{{- if .Values.database.urlSecret.name -}}true{{- end -}}
{{- end -}}

{{- define "observer.usesPvc" -}}
{{- if .Values.controller.persistence.enabled -}}true{{- end -}}
{{- end -}}

{{- define "observer.pvcName" -}}
{{- default (printf "%s-data" (include "observer.controllerName" .)) .Values.controller.persistence.existingClaim -}}
{{- end -}}

{{/* The rendered settings file: the values' settings plus what the chart owns. */}}
{{- define "observer.config" -}}
{{- $settings := deepCopy .Values.settings -}}
{{- $agent := get $settings "agent" | default dict -}}
{{- $_ := set $agent "proc_root" "/host/proc" -}}
{{- if and .Values.agent.podResources.enabled .Values.agent.podResources.kubeletPods.enabled (not .Values.agent.podResources.kubeletPods.verifyCertificate) -}}
{{- $_ := set $agent "kubelet_ca_file" nil -}}
{{- end -}}
{{- $_ := set $settings "agent" $agent -}}
{{- $controller := get $settings "controller" | default dict -}}
{{- if and .Values.agent.enabled (not (hasKey $controller "agent_urls")) (not (hasKey $controller "agent_dns_name")) -}}
{{- /* the agents' headless Service resolves to every agent, ready or not */ -}}
{{- $_ := set $controller "agent_dns_name" (printf "%s.%s.svc" (include "observer.agentName" .) (include "observer.agentNamespace" .)) -}}
{{- $_ := set $controller "agent_port" (include "observer.agentPort" . | int) -}}
{{- end -}}
{{- if eq (include "observer.backend" .) "kubernetes" -}}
{{- $kube := get $controller "kubernetes" | default dict -}}
{{- $_ := set $kube "namespaces" (include "observer.probeNamespaces" . | fromJsonArray) -}}
{{- if not (get $kube "image") -}}
{{- /* the probes run `observer probe ...`: the observer's own image, unless the site names one */ -}}
{{- $_ := set $kube "image" (include "observer.image" .) -}}
{{- end -}}
{{- if .Values.controller.tenantTokenSecrets -}}
{{- $files := get $kube "tenant_token_files" | default dict -}}
{{- range $tenant, $_ := .Values.controller.tenantTokenSecrets -}}
{{- $_ := set $files $tenant (printf "%s/%s/token" (include "observer.tenantTokenDir" $) $tenant) -}}
{{- end -}}
{{- $_ := set $kube "tenant_token_files" $files -}}
{{- end -}}
{{- $_ := set $controller "kubernetes" $kube -}}
{{- end -}}
{{- $_ := set $settings "controller" $controller -}}
{{- $storage := deepCopy (get $settings "storage" | default dict) -}}
{{- $_ := set $storage "sqlite_path" "/var/lib/observer/observer.db" -}}
{{- $_ := set $settings "storage" $storage -}}
{{- toYaml $settings -}}
{{- end -}}

{{- define "observer.tenantTokenDir" -}}/var/run/secrets/observer/tenants{{- end -}}

{{/* Monitoring job names (the monitors set `job` to these). */}}
{{- define "observer.agentJob" -}}
{{- default (include "observer.agentName" .) .Values.prometheusRule.jobs.agent -}}
{{- end -}}

{{- define "observer.controllerJob" -}}
{{- default (include "observer.controllerName" .) .Values.prometheusRule.jobs.controller -}}
{{- end -}}

{{/* Environment of the controller and its migration: the database URL and secret settings. */}}
{{- define "observer.controllerSecretEnv" -}}
{{- if include "observer.usesPostgres" . }}
- name: OBSERVER_STORAGE__URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.urlSecret.name }}
      key: {{ .Values.database.urlSecret.key }}
{{- end }}
{{- range .Values.controller.secretEnv }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
      {{- if .optional }}
      optional: true
      {{- end }}
{{- end }}
{{- end -}}

{{- define "observer.controllerEnvFrom" -}}
{{- range .Values.controller.envFromSecrets }}
- secretRef:
    name: {{ . }}
{{- end }}
{{- end -}}

{{/* Volumes ---------------------------------------------------------------------------- */}}
{{/* The mounts of the agent's container, as a YAML list. */}}
{{- define "observer.agentVolumeMounts" -}}
- name: config
  mountPath: /etc/observer
  readOnly: true
- name: host-proc
  mountPath: /host/proc
  readOnly: true
{{- if .Values.agent.podResources.enabled }}
- name: pod-resources
  mountPath: /var/lib/kubelet/pod-resources
  readOnly: true
- name: pod-logs
  mountPath: /var/log/pods
  readOnly: true
{{- if .Values.agent.podResources.kubeletPods.enabled }}
- name: kubelet-token
  mountPath: /var/run/secrets/kubernetes.io/serviceaccount
  readOnly: true
{{- end }}
{{- end }}
- name: tmp
  mountPath: /tmp
{{- if eq .Values.agent.gpuAccess "volumeMounts" }}
- name: nvidia-devices
  mountPath: /var/run/nvidia-container-devices/all
  readOnly: true
{{- end }}
{{- with .Values.agent.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The mounts of the controller's container, as a YAML list. */}}
{{- define "observer.controllerVolumeMounts" -}}
- name: config
  mountPath: /etc/observer
  readOnly: true
- name: data
  mountPath: /var/lib/observer
- name: tmp
  mountPath: /tmp
{{- range $tenant, $_ := .Values.controller.tenantTokenSecrets }}
- name: token-{{ $tenant }}
  mountPath: {{ include "observer.tenantTokenDir" $ }}/{{ $tenant }}
  readOnly: true
{{- end }}
{{- with .Values.controller.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* A workload's extraVolumes and extraHostVolumes as pod volumes: call with its values. */}}
{{- define "observer.extraVolumes" -}}
{{- with .extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- range .extraHostVolumes }}
- name: {{ .name }}
  hostPath:
    path: {{ .hostPath }}
    {{- with .type }}
    type: {{ . }}
    {{- end }}
{{- end }}
{{- end -}}

{{/* The settings that name a file or directory, by the container that reads them
(tests/deploy/test_chart_volumes.py derives the list from observer/settings/). */}}
{{- define "observer.pathSettings" -}}
agent:
  - agent.nvml_library_path
  - agent.replay_trace_dir
  - agent.proc_root
  - agent.passwd_file
  - agent.pod_resources_socket
  - agent.pod_logs_dir
  - agent.kubelet_token_file
  - agent.kubelet_ca_file
  - agent.kernel_log_path
  - agent.state_dir
controller:
  - controller.kubernetes.kubeconfig_path
  - controller.kubernetes.audit_log_path
  - controller.slurm.slurm_conf
  - controller.slurm.commands_dir
  - controller.slurm.output_dir
  - controller.slurm.observer_program
  - controller.logs.files.pattern
  - controller.logs.loki.auth.password.file
  - controller.logs.loki.auth.bearer_token.file
  - controller.logs.elasticsearch.auth.password.file
  - controller.logs.elasticsearch.auth.bearer_token.file
  - storage.sqlite_path
  - reports.output_dir
{{- end -}}

{{/* Fails on a path-valued setting of the rendered config that lies outside every mount of
its container, which the process would find missing (or on the image's read-only root):
call with (dict "ctx" $ "component" "agent" "mounts" <the container's volumeMounts YAML>).
A relative path is taken from the image's WORKDIR, a glob (logs.files.pattern) up to its
first wildcard. */}}
{{- define "observer.checkPaths" -}}
{{- $component := .component -}}
{{- $config := include "observer.config" .ctx | fromYaml -}}
{{- $mounts := list -}}
{{- range (fromYamlArray .mounts) -}}{{- $mounts = append $mounts (trimSuffix "/" .mountPath) -}}{{- end -}}
{{- range $setting := get (include "observer.pathSettings" .ctx | fromYaml) $component -}}
{{- $value := $config -}}
{{- range $key := splitList "." $setting -}}
{{- if kindIs "map" $value -}}{{- $value = get $value $key -}}{{- else -}}{{- $value = "" -}}{{- end -}}
{{- end -}}
{{- if $value -}}
{{- $path := regexReplaceAll "[*?\\[].*$" (toString $value) "" -}}
{{- if not (hasPrefix "/" $path) -}}{{- $path = printf "/var/lib/observer/%s" $path -}}{{- end -}}
{{- $inside := false -}}
{{- range $mount := $mounts -}}
{{- if or (eq $path $mount) (hasPrefix (printf "%s/" $mount) $path) -}}{{- $inside = true -}}{{- end -}}
{{- end -}}
{{- if not $inside -}}
{{- fail (printf "settings.%s (%v) is outside every volume the %s container mounts (%s): mount it with %s.extraHostVolumes or %s.extraVolumes, and %s.extraVolumeMounts" $setting $value $component (join ", " $mounts) $component $component $component) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
