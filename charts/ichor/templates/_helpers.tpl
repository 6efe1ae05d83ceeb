{{/* Names and labels shared by every object of the chart. */}}
{{- define "ichor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ichor.fullname" -}}
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

{{- define "ichor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ichor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ichor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "ichor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "ichor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ichor.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ichor.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the webhook's serving certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "ichor.webhookSecret" -}}
{{- if eq .Values.webhook.certificate.source "secret" -}}
{{- required "webhook.certificate.existingSecret is required for source secret" .Values.webhook.certificate.existingSecret -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "ichor.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "ichor.webhookService" -}}
{{- printf "%s-webhook" (include "ichor.fullname" .) -}}
{{- end -}}

{{/* The name of kopf's peering object; only used with more than one replica. */}}
{{- define "ichor.peering" -}}
{{- include "ichor.fullname" . -}}
{{- end -}}

{{- define "ichor.networkPolicyEnabled" -}}
{{- if kindIs "bool" .Values.networkPolicy.enabled -}}
{{- .Values.networkPolicy.enabled -}}
{{- else -}}
{{- .Values.releaseCheck.enabled -}}
{{- end -}}
{{- end -}}
