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

{{/*
Replicas of a Deployment spread over nodes (preferred: one node still
runs them all) and, with more than one, a PodDisruptionBudget that lets a
drain take one at a time.
*/}}
{{- define "mlsysops.spread" -}}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            app.kubernetes.io/name: {{ . }}
{{- end }}

{{- define "mlsysops.pdb" -}}
{{- if gt (int .replicas) 1 }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: mlsysops-framework
  labels:
    {{- include "mlsysops.labels" .root | nindent 4 }}
  annotations:
    {{- include "mlsysops.stage" "continuum" | nindent 4 }}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
{{- end }}
{{- end }}

{{/* The ML connector's S3 endpoint: given, or the bundled S3 server's Service. */}}
{{- define "mlsysops.s3Endpoint" -}}
{{- if .Values.mlconnector.s3.endpoint }}{{ .Values.mlconnector.s3.endpoint }}
{{- else if include "mlsysops.bundled" . }}http://mlsysops-s3.mlsysops-framework.svc:7070
{{- else }}{{ fail "mlconnector.s3.endpoint: the S3 endpoint of the ML connector's files, http(s)://host:port (external services)" }}
{{- end }}
{{- end }}

{{/*
The ML connector's URL as the model servers' pods in the member clusters
reach it: given, or its NodePort on karmadaHostIP.
*/}}
{{- define "mlsysops.mlconnectorURL" -}}
{{- $mlc := .Values.mlconnector }}
{{- if $mlc.downloadURL }}{{ $mlc.downloadURL }}
{{- else if and .Values.karmadaHostIP (eq $mlc.service.type "NodePort") $mlc.service.nodePort }}
{{- $ip := .Values.karmadaHostIP }}
{{- if contains ":" $ip }}{{ $ip = printf "[%s]" $ip }}{{ end -}}
http://{{ $ip }}:{{ $mlc.service.nodePort }}
{{- else }}{{ fail "mlconnector.downloadURL: the ML connector's URL as pods in the member clusters reach it (or karmadaHostIP with mlconnector.service.type NodePort and a nodePort)" }}
{{- end }}
{{- end }}
