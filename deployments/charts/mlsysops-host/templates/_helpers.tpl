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

{{- define "mlsysops.bundled" -}}
{{- if not (has .Values.services.mode (list "bundled" "external")) }}
{{- fail (printf "services.mode: want bundled or external, got %q" .Values.services.mode) }}
{{- end }}
{{- if eq .Values.services.mode "bundled" }}true{{ end }}
{{- end }}

{{/* Service addresses: given, or the bundled services' on the host node. */}}
{{- define "mlsysops.xmppServer" -}}
{{- if .Values.xmpp.server }}{{ .Values.xmpp.server }}
{{- else if include "mlsysops.bundled" . }}{{ required "karmadaHostIP: the address of the node labelled mlsysops.eu/continuumLayer=continuum (KARMADA_HOST_IP)" .Values.karmadaHostIP }}:5222
{{- else }}{{ fail "xmpp.server: ejabberd's host:port (external services)" }}
{{- end }}
{{- end }}

{{- define "mlsysops.redisAddress" -}}
{{- if .Values.redis.address }}{{ .Values.redis.address }}
{{- else if include "mlsysops.bundled" . }}mlsysops-redis.mlsysops-framework.svc:6379
{{- else }}{{ fail "redis.address: Redis host:port (external services)" }}
{{- end }}
{{- end }}

{{- define "mlsysops.postgresAddress" -}}
{{- if .Values.postgres.address }}{{ .Values.postgres.address }}
{{- else if include "mlsysops.bundled" . }}mlsysops-postgres.mlsysops-framework.svc:5432
{{- else }}{{ fail "postgres.address: PostgreSQL host:port (external services)" }}
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

{{- define "mlsysops.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end }}

{{/* ejabberd's admin API: given, or the bundled server's Service. */}}
{{- define "mlsysops.ejabberdAPI" -}}
{{- if .Values.xmpp.adminAPI }}{{ .Values.xmpp.adminAPI }}
{{- else if include "mlsysops.bundled" . }}https://mlsysops-ejabberd.mlsysops-framework.svc:5443/api
{{- else }}{{ fail "xmpp.adminAPI: ejabberd's admin API URL (external services)" }}
{{- end }}
{{- end }}
