{{/*
Names, labels, images and the pieces every pod of the chart shares. Resource names and labels
come only from here.
*/}}

{{- define "mediator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-<chart>, or the release name alone when it already holds the chart's name. */}}
{{- define "mediator.fullname" -}}
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

{{/* The name of a component's resources: (dict "context" $ "component" "worker"). */}}
{{- define "mediator.componentName" -}}
{{- printf "%s-%s" (include "mediator.fullname" .context) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mediator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every resource: (dict "context" $ "component" "node"). */}}
{{- define "mediator.labels" -}}
helm.sh/chart: {{ include "mediator.chart" .context }}
{{ include "mediator.selectorLabels" . }}
app.kubernetes.io/version: {{ .context.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .context.Release.Service }}
app.kubernetes.io/part-of: {{ include "mediator.name" .context }}
{{- with .context.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels selectors use: name, instance and component. */}}
{{- define "mediator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mediator.name" .context }}
app.kubernetes.io/instance: {{ .context.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* metadata.annotations: commonAnnotations and a component's own (dict "context" $ "annotations" map). */}}
{{- define "mediator.annotations" -}}
{{- $all := merge (deepCopy (default dict .annotations)) (deepCopy .context.Values.commonAnnotations) -}}
{{- with $all }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* registry/repository:tag, or @digest when one is given; the tag defaults to appVersion. */}}
{{- define "mediator.image" -}}
{{- $image := .image -}}
{{- $ref := printf "%s/%s" $image.registry $image.repository | trimPrefix "/" -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $ref $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $ref (default .context.Chart.AppVersion $image.tag | toString) -}}
{{- end -}}
{{- end -}}

{{- define "mediator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mediator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* A string value that Kubernetes takes as IntOrString: digits become a number. */}}
{{- define "mediator.intOrString" -}}
{{- if regexMatch "^[0-9]+$" (toString .) -}}
{{- toString . -}}
{{- else -}}
{{- toString . | quote -}}
{{- end -}}
{{- end -}}

{{/* ------------------------------------------------------------------ secrets */}}

{{/* Whether the chart renders its own Secret, and what goes in it. */}}
{{- define "mediator.secretData" -}}
{{- if and .Values.redis.password (not .Values.redis.existingSecret) }}
redis-password: {{ .Values.redis.password | b64enc | quote }}
{{- end }}
{{- if not .Values.auth.existingSecret }}
{{- if .Values.auth.keySeed }}
key-seed: {{ .Values.auth.keySeed | b64enc | quote }}
{{- end }}
{{- if .Values.auth.apiTokens }}
api-tokens: {{ join "," .Values.auth.apiTokens | b64enc | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The Redis environment: REDIS_PASSWORD from a Secret, then MEDIATOR_REDIS_URL with the password
inserted as the URL's user info, which Kubernetes expands from the variable before it
($(REDIS_PASSWORD)); or the whole URL from an existing Secret.
*/}}
{{- define "mediator.redisEnv" -}}
{{- $redis := .Values.redis -}}
{{- if and $redis.existingSecret $redis.existingSecretUrlKey }}
- name: MEDIATOR_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $redis.existingSecret }}
      key: {{ $redis.existingSecretUrlKey }}
{{- else if or $redis.existingSecret $redis.password }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ default (include "mediator.fullname" .) $redis.existingSecret }}
      key: {{ ternary $redis.existingSecretPasswordKey "redis-password" (not (empty $redis.existingSecret)) }}
- name: MEDIATOR_REDIS_URL
  value: {{ include "mediator.redisUrlWithPassword" . | quote }}
{{- else }}
- name: MEDIATOR_REDIS_URL
  value: {{ $redis.url | quote }}
{{- end }}
{{- end -}}

{{/* redis.url with user info `[user]:$(REDIS_PASSWORD)@` after the scheme, for every scheme. */}}
{{- define "mediator.redisUrlWithPassword" -}}
{{- $redis := .Values.redis -}}
{{- $parts := regexSplit "://" $redis.url 2 -}}
{{- $url := printf "%s://%s:$(REDIS_PASSWORD)@%s" (index $parts 0) $redis.username (index $parts 1) -}}
{{- if and $redis.sentinelAuth (contains "+sentinel" (index $parts 0)) -}}
{{- $url = printf "%s%ssentinel_password=$(REDIS_PASSWORD)" $url (ternary "&" "?" (contains "?" $url)) -}}
{{- end -}}
{{- $url -}}
{{- end -}}

{{/* The key seed (and, for nodes, the API tokens) from the chart's or an existing Secret. */}}
{{- define "mediator.authEnv" -}}
{{- $auth := .context.Values.auth -}}
{{- if $auth.existingSecret }}
- name: MEDIATOR_KEY_SEED
  valueFrom:
    secretKeyRef:
      name: {{ $auth.existingSecret }}
      key: {{ $auth.existingSecretKeySeedKey }}
      optional: true
{{- if .tokens }}
- name: MEDIATOR_API_TOKENS
  valueFrom:
    secretKeyRef:
      name: {{ $auth.existingSecret }}
      key: {{ $auth.existingSecretApiTokensKey }}
      optional: true
{{- end }}
{{- else }}
{{- if $auth.keySeed }}
- name: MEDIATOR_KEY_SEED
  valueFrom:
    secretKeyRef:
      name: {{ include "mediator.fullname" .context }}
      key: key-seed
{{- end }}
{{- if and .tokens $auth.apiTokens }}
- name: MEDIATOR_API_TOKENS
  valueFrom:
    secretKeyRef:
      name: {{ include "mediator.fullname" .context }}
      key: api-tokens
{{- end }}
{{- end }}
{{- end -}}

{{/* ------------------------------------------------------------------ settings */}}

{{/* The public endpoint: config.endpoint, else the Ingress's or the HTTPRoute's host name. */}}
{{- define "mediator.endpoint" -}}
{{- if .Values.config.endpoint -}}
{{- .Values.config.endpoint -}}
{{- else if .Values.ingress.enabled -}}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls) .Values.ingress.hostname -}}
{{- else if and .Values.httpRoute.enabled .Values.httpRoute.hostnames -}}
{{- printf "https://%s" (first .Values.httpRoute.hostnames) -}}
{{- end -}}
{{- end -}}

{{/* Pod annotations that roll the pods when the settings or the chart's Secret change. */}}
{{- define "mediator.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end -}}

{{/* The pod-level settings every pod of the chart shares. */}}
{{- define "mediator.podCommon" -}}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
serviceAccountName: {{ include "mediator.serviceAccountName" . }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* ------------------------------------------------------------------ notifications */}}

{{- define "mediator.notificationsPath" -}}/etc/mediator/notifications{{- end -}}

{{/* The providers' settings of nodes and workers (files from the mounted Secret). */}}
{{- define "mediator.notificationsEnv" -}}
{{- $n := .Values.notifications -}}
{{- $dir := include "mediator.notificationsPath" . -}}
{{- if $n.existingSecret }}
- name: MEDIATOR_NOTIFY_INTERVAL_SECONDS
  value: {{ $n.intervalSeconds | quote }}
{{- if $n.fcmCredentialsKey }}
- name: MEDIATOR_FCM_CREDENTIALS_FILE
  value: {{ printf "%s/%s" $dir $n.fcmCredentialsKey | quote }}
{{- end }}
{{- if $n.apns.keyKey }}
- name: MEDIATOR_APNS_KEY_FILE
  value: {{ printf "%s/%s" $dir $n.apns.keyKey | quote }}
- name: MEDIATOR_APNS_KEY_ID
  value: {{ $n.apns.keyId | quote }}
- name: MEDIATOR_APNS_TEAM_ID
  value: {{ $n.apns.teamId | quote }}
- name: MEDIATOR_APNS_TOPIC
  value: {{ $n.apns.topic | quote }}
- name: MEDIATOR_APNS_ENVIRONMENT
  value: {{ $n.apns.environment | quote }}
{{- end }}
{{- if $n.webhook.url }}
- name: MEDIATOR_NOTIFY_WEBHOOK_URL
  value: {{ $n.webhook.url | quote }}
- name: MEDIATOR_NOTIFY_WEBHOOK_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ $n.existingSecret }}
      key: {{ $n.webhook.secretKey }}
{{- end }}
{{- if $n.appsKey }}
- name: MEDIATOR_PUSH_APPS_FILE
  value: {{ printf "%s/%s" $dir $n.appsKey | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "mediator.notificationsMount" -}}
{{- if .Values.notifications.existingSecret }}
- name: notifications
  mountPath: {{ include "mediator.notificationsPath" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* The Secret's files readable by the pods' group only (fsGroup), never written. */}}
{{- define "mediator.notificationsVolume" -}}
{{- if .Values.notifications.existingSecret }}
- name: notifications
  secret:
    secretName: {{ .Values.notifications.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* The /tmp emptyDir every container writes to (the root filesystem is read-only). */}}
{{- define "mediator.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ . }}
{{- end -}}

{{/*
checkov skips, each with its reason, as checkov reads them from a resource's annotations
(checkov.io/skipN: CHECK_ID=reason). (dict "context" $ "image" imageValues): the image checks
are skipped only while the values leave them unmet.
*/}}
{{- define "mediator.checkovSkips" -}}
{{- $skips := list "CKV_K8S_35=the Redis password must be an environment variable: Kubernetes expands it into MEDIATOR_REDIS_URL, and the mediator reads settings from its environment only" -}}
{{- if not .image.digest -}}
{{- $skips = append $skips "CKV_K8S_43=the image is named by tag (the chart's appVersion) unless image.digest is set" -}}
{{- end -}}
{{- if ne .image.pullPolicy "Always" -}}
{{- $skips = append $skips "CKV_K8S_15=tags are immutable releases, so IfNotPresent is safe and works with images loaded into the nodes; set image.pullPolicy to Always otherwise" -}}
{{- end -}}
{{- range $i, $skip := $skips }}
checkov.io/skip{{ add1 $i }}: {{ $skip | quote }}
{{- end }}
{{- end -}}

{{/* A setting as the string an environment variable holds: whole numbers without an exponent
(YAML numbers reach templates as floats, which print 2592000 as 2.592e+06). */}}
{{- define "mediator.settingValue" -}}
{{- if and (kindIs "float64" .) (eq (float64 .) (floor .)) -}}
{{- int64 . | toString | quote -}}
{{- else -}}
{{- toString . | quote -}}
{{- end -}}
{{- end -}}
