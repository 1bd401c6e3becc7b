{{/* The release's object name prefix: the release name when it already names the chart. */}}
{{- define "failoverd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: the Deployment's selector, Service and policies. */}}
{{- define "failoverd.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "failoverd.labels" -}}
{{ include "failoverd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "failoverd.serviceAccountName" -}}
{{- default (include "failoverd.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "failoverd.secretName" -}}
{{- default (include "failoverd.fullname" .) .Values.secret.name -}}
{{- end -}}

{{- define "failoverd.configMapName" -}}
{{- default (printf "%s-config" (include "failoverd.fullname" .)) .Values.config.existingConfigMap -}}
{{- end -}}

{{/*
Refuses values that cannot make a working daemon, naming every problem at
once: there is no default group, so a bare install stops here and says
what to set. Renders nothing when the values are usable.
*/}}
{{- define "failoverd.check" -}}
{{- $problems := list -}}
{{- if not .Values.config.existingConfigMap -}}
{{- if not .Values.config.groups -}}
{{- $problems = append $problems "config.groups is empty: describe your failover groups (sites, credentials, fencing) in a values file of your own, as deploy/helm/failoverd/examples/payments-values.yaml does (helm install -f my-values.yaml), or name a ConfigMap holding failoverd.yaml in config.existingConfigMap" -}}
{{- end -}}
{{- $home := .Values.homeCluster -}}
{{- if not $home -}}
{{- $problems = append $problems "homeCluster is empty: name the config.clusters entry {name: NAME, inCluster: true} the daemon runs in (its Lease, state ConfigMap and RBAC are there)" -}}
{{- else -}}
{{- $found := false -}}
{{- range .Values.config.clusters -}}
{{- if and (eq .name $home) .inCluster -}}{{- $found = true -}}{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- $problems = append $problems (printf "config.clusters needs the home cluster {name: %s, inCluster: true}" $home) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $problems -}}
{{- fail (printf "\n  %s" (join "\n  " $problems)) -}}
{{- end -}}
{{- end -}}

{{/*
The configuration file: config without existingConfigMap, with the daemon
section the chart owns (listen, secret files, state store and Lease in the
home cluster and release namespace).
*/}}
{{- define "failoverd.configFile" -}}
{{- include "failoverd.check" . -}}
{{- $cfg := omit (deepCopy .Values.config) "existingConfigMap" -}}
{{- $home := .Values.homeCluster -}}
{{- $fullname := include "failoverd.fullname" . -}}
{{- $daemon := default (dict) $cfg.daemon -}}
{{- $le := default (dict) $daemon.leaderElection -}}
{{- $_ := set $daemon "listen" "0.0.0.0:8080" -}}
{{- $_ = set $daemon "apiTokenFile" "/etc/failoverd/secrets/api.token" -}}
{{- $_ = set $daemon "viewSigningKeyFile" "/etc/failoverd/secrets/view.key" -}}
{{- $_ = set $daemon "stateStore" (dict "type" "kubernetes" "cluster" $home "namespace" .Release.Namespace "configMap" (printf "%s-state" $fullname)) -}}
{{- $_ = set $daemon "leaderElection" (mergeOverwrite $le (dict "enabled" true "cluster" $home "namespace" .Release.Namespace "leaseName" (printf "%s-leader" $fullname))) -}}
{{- $_ = set $cfg "daemon" $daemon -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
Services the daemon routes in the home cluster, as a dict namespace → sorted
names: rbac.services (always with config.existingConfigMap), or every
kubernetes.service of a site placed there.
*/}}
{{- define "failoverd.routedServices" -}}
{{- $out := dict -}}
{{- if or .Values.config.existingConfigMap .Values.rbac.services -}}
{{- range .Values.rbac.services -}}
{{- $_ := set $out .namespace (concat (get $out .namespace | default list) .names | uniq | sortAlpha) -}}
{{- end -}}
{{- else -}}
{{- range .Values.config.groups -}}
{{- range .sites -}}
{{- $k := .kubernetes -}}
{{- if and $k (eq (toString $k.cluster) $.Values.homeCluster) $k.service -}}
{{- $_ := set $out $k.namespace (append (get $out $k.namespace | default list) $k.service | uniq | sortAlpha) -}}
{{- end -}}
{{- end -}}
{{- $r := .readers | default dict -}}
{{- if and $r.enabled $r.kubernetes -}}
{{- range .sites -}}
{{- $k := .kubernetes -}}
{{- if and $k (eq (toString $k.cluster) $.Values.homeCluster) $k.podSelector -}}
{{- $_ := set $out $k.namespace (append (get $out $k.namespace | default list) $r.kubernetes.service | uniq | sortAlpha) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
Namespaces of the home cluster whose pods get the reader label, as a dict
namespace → true: rbac.readerPods (always with config.existingConfigMap),
or the namespaces of the sites placed there (with a podSelector) of every
group with readers.kubernetes.
*/}}
{{- define "failoverd.readerPods" -}}
{{- $out := dict -}}
{{- if or .Values.config.existingConfigMap .Values.rbac.readerPods -}}
{{- range .Values.rbac.readerPods -}}
{{- $_ := set $out . true -}}
{{- end -}}
{{- else -}}
{{- range .Values.config.groups -}}
{{- $r := .readers | default dict -}}
{{- if and $r.enabled $r.kubernetes -}}
{{- range .sites -}}
{{- $k := .kubernetes -}}
{{- if and $k (eq (toString $k.cluster) $.Values.homeCluster) $k.podSelector -}}
{{- $_ := set $out $k.namespace true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
DNSEndpoints in the home cluster, as a dict namespace → sorted names:
rbac.dnsEndpoints (always with config.existingConfigMap), or every group's
dns placed there.
*/}}
{{- define "failoverd.dnsEndpoints" -}}
{{- $out := dict -}}
{{- if or .Values.config.existingConfigMap .Values.rbac.dnsEndpoints -}}
{{- range .Values.rbac.dnsEndpoints -}}
{{- $_ := set $out .namespace (concat (get $out .namespace | default list) .names | uniq | sortAlpha) -}}
{{- end -}}
{{- else -}}
{{- range .Values.config.groups -}}
{{- if and .dns (eq (toString .dns.cluster) $.Values.homeCluster) -}}
{{- $_ := set $out .dns.namespace (append (get $out .dns.namespace | default list) .dns.endpointName | uniq | sortAlpha) -}}
{{- $r := .readers | default dict -}}
{{- if and $r.enabled $r.dns -}}
{{- $_ := set $out .dns.namespace (append (get $out .dns.namespace | default list) $r.dns.endpointName | uniq | sortAlpha) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
"true" when the daemon taints Nodes of the home cluster: a site placed there
has a nodeSelector (with config.existingConfigMap: always, rbac.nodeTaints
decides).
*/}}
{{- define "failoverd.taintsNodes" -}}
{{- $any := false -}}
{{- range .Values.config.groups -}}
{{- range .sites -}}
{{- if and .kubernetes (eq (toString .kubernetes.cluster) $.Values.homeCluster) .kubernetes.nodeSelector -}}{{- $any = true -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if or $any .Values.config.existingConfigMap -}}true{{- end -}}
{{- end -}}
