{{/* Labels every object carries; the deployer finds its objects by them. */}}
{{- define "mlsysops.labels" -}}
app.kubernetes.io/part-of: mlsysops
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The install stage of an object: services, continuum, clusters, nodes. */}}
{{- define "mlsysops.stage" -}}
mlsysops.eu/install-stage: {{ . }}
{{- end }}

{{/*
Objects the applications need (CRDs, their propagation, the applications'
namespace): uninstall keeps them unless --purge.
*/}}
{{- define "mlsysops.purgeOnly" -}}
mlsysops.eu/uninstall: purge
{{- end }}

{{- define "mlsysops.image" -}}
{{- $tag := .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{ printf "%s/mlsysops/%s:%s" .root.Values.image.registry .name $tag }}
{{- end }}

{{/*
Environment shared by the cluster and node agents. NODE_NAME stays first:
the OverridePolicies of overrides.yaml replace the cluster agent's env/0
with its cluster's name.
*/}}
{{- define "mlsysops.agentEnv" -}}
- name: NODE_NAME
  valueFrom:
    fieldRef: {fieldPath: spec.nodeName}
- name: MLSYSOPS_XMPP_DOMAIN
  value: {{ .Values.xmpp.domain | quote }}
{{- with .Values.xmpp.server }}
- name: MLSYSOPS_XMPP_SERVER
  value: {{ . | quote }}
{{- end }}
{{- if .Values.xmpp.caBundle }}
- name: MLSYSOPS_XMPP_CA_FILE
  value: /etc/mlsysops/xmpp-ca/ca.crt
{{- end }}
- name: MLSYSOPS_XMPP_PASSWORD_FILE
  value: /var/run/secrets/mlsysops/xmpp/password
{{- with .Values.xmpp.controllers }}
- name: MLSYSOPS_XMPP_CONTROLLERS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.continuumName }}
- name: MLSYSOPS_CONTINUUM_NAME
  value: {{ . | quote }}
{{- end }}
- name: DESCRIPTION_PATH
  value: /etc/mlsysops/descriptions
- name: CONFIG_PATH
  value: /etc/mlsysops/config/config.yaml
- name: MLSYSOPS_LISTEN
  value: ":9464"
# /status, /ping and profiles need this token; probes and /metrics not.
- name: MLSYSOPS_HTTP_TOKEN_FILE
  value: /var/run/secrets/mlsysops/http/token
{{- end }}

{{/*
The agents' XMPP passwords: the Secret mlsysops-agents-<cluster> of every
described cluster, all optional. Each member cluster receives only its own
(see propagation.yaml), so in a member exactly one source resolves; each
container then mounts only its own key (subPathExpr). In a described
member the OverridePolicy mlsysops-agents-<cluster> (overrides.yaml)
replaces this volume with that cluster's Secret, required, so that no pod
starts before its Secret is there (a missing key would be mounted as an
empty directory, for good). It is the DaemonSets' volumes/0.
*/}}
{{- define "mlsysops.credentialsVolume" -}}
- name: xmpp-credentials
  projected:
    defaultMode: 0440
    sources:
    {{- range $cluster, $_ := .Values.clusters }}
    - secret:
        name: {{ printf "mlsysops-agents-%s" $cluster }}
        optional: true
    {{- end }}
{{- end }}

{{- define "mlsysops.probes" -}}
readinessProbe:
  httpGet: {path: /readyz, port: metrics}
  periodSeconds: 5
livenessProbe:
  httpGet: {path: /healthz, port: metrics}
  periodSeconds: 20
  failureThreshold: 6
{{- end }}
