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

{{- define "mediator.secretsPath" -}}/etc/mediator/secrets{{- end -}}

{{/*
Where the Redis password is, as YAML (name: <Secret>, key: <key>), or nothing: the chart's
Secret (redis.password) or redis.existingSecret's redis.existingSecretPasswordKey; never when
the whole URL comes from a Secret, nor when that key is set to "".
*/}}
{{- define "mediator.redisPasswordRef" -}}
{{- $redis := .Values.redis -}}
{{- if $redis.existingSecret -}}
{{- if and (not $redis.existingSecretUrlKey) $redis.existingSecretPasswordKey -}}
name: {{ $redis.existingSecret }}
key: {{ $redis.existingSecretPasswordKey }}
{{- end -}}
{{- else if $redis.password -}}
name: {{ include "mediator.fullname" . }}
key: redis-password
{{- end -}}
{{- end -}}

{{/*
The secrets a pod reads from files, as a YAML list of {env, name, key, path}: the variable
naming the file, the Secret and key it comes from, and the file's name in the secrets volume.
(dict "context" $ "redis" bool "tokens" bool): the Redis password when .redis, the key seed
always, the API tokens when .tokens (nodes only). A key of an existing Secret set to "" is
left out.
*/}}
{{- define "mediator.secretFiles" -}}
{{- $ := .context -}}
{{- $auth := $.Values.auth -}}
{{- $own := include "mediator.fullname" $ -}}
{{- $files := list -}}
{{- if .redis -}}
{{- with include "mediator.redisPasswordRef" $ | fromYaml -}}
{{- $files = append $files (dict "env" "MEDIATOR_REDIS_PASSWORD_FILE" "name" .name "key" .key "path" "redis-password") -}}
{{- end -}}
{{- end -}}
{{- if $auth.existingSecret -}}
{{- if $auth.existingSecretKeySeedKey -}}
{{- $files = append $files (dict "env" "MEDIATOR_KEY_SEED_FILE" "name" $auth.existingSecret "key" $auth.existingSecretKeySeedKey "path" "key-seed") -}}
{{- end -}}
{{- if and .tokens $auth.existingSecretApiTokensKey -}}
{{- $files = append $files (dict "env" "MEDIATOR_API_TOKENS_FILE" "name" $auth.existingSecret "key" $auth.existingSecretApiTokensKey "path" "api-tokens") -}}
{{- end -}}
{{- else -}}
{{- if $auth.keySeed -}}
{{- $files = append $files (dict "env" "MEDIATOR_KEY_SEED_FILE" "name" $own "key" "key-seed" "path" "key-seed") -}}
{{- end -}}
{{- if and .tokens $auth.apiTokens -}}
{{- $files = append $files (dict "env" "MEDIATOR_API_TOKENS_FILE" "name" $own "key" "api-tokens" "path" "api-tokens") -}}
{{- end -}}
{{- end -}}
{{- toYaml $files -}}
{{- end -}}

{{/* The variables naming the secret files: (dict "context" $ "files" list). */}}
{{- define "mediator.secretFilesEnv" -}}
{{- $dir := include "mediator.secretsPath" .context -}}
{{- range .files }}
- name: {{ .env }}
  value: {{ printf "%s/%s" $dir .path | quote }}
{{- end }}
{{- end -}}

{{- define "mediator.secretFilesMount" -}}
{{- if .files }}
- name: secrets
  mountPath: {{ include "mediator.secretsPath" .context }}
  readOnly: true
{{- end }}
{{- end -}}

{{/*
One projected volume of the secret files, a source per Secret (in the order of the files),
each key to its fixed file name. No item is optional: a key the values name must be in its
Secret, or the pod does not start. Readable by the pods' group only (fsGroup), never written.
*/}}
{{- define "mediator.secretFilesVolume" -}}
{{- if .files }}
{{- $names := list -}}
{{- range .files }}{{ $names = append $names .name }}{{ end }}
- name: secrets
  projected:
    defaultMode: 0440
    sources:
      {{- range $name := uniq $names }}
      - secret:
          name: {{ $name }}
          items:
            {{- range $.files }}
            {{- if eq .name $name }}
            - key: {{ .key }}
              path: {{ .path }}
            {{- end }}
            {{- end }}
      {{- end }}
{{- end }}
{{- end -}}

{{/*
The Redis environment. MEDIATOR_REDIS_URL is redis.url with redis.username as its user info;
the mediator puts the password from MEDIATOR_REDIS_PASSWORD_FILE into it (and, with
MEDIATOR_REDIS_SENTINEL_AUTH, sends it to the sentinels too); the file is in
mediator.secretFiles. A whole URL from an existing Secret (redis.existingSecretUrlKey) can only
be an environment variable. (dict "context" $).
*/}}
{{- define "mediator.redisEnv" -}}
{{- $ := .context -}}
{{- $redis := $.Values.redis -}}
{{- $ref := include "mediator.redisPasswordRef" $ | fromYaml -}}
{{- if and $redis.existingSecret $redis.existingSecretUrlKey }}
- name: MEDIATOR_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $redis.existingSecret }}
      key: {{ $redis.existingSecretUrlKey }}
{{- else }}
- name: MEDIATOR_REDIS_URL
  value: {{ include "mediator.redisUrl" $ | quote }}
{{- if and $ref (include "mediator.redisSentinelAuth" $) }}
- name: MEDIATOR_REDIS_SENTINEL_AUTH
  value: "true"
{{- end }}
{{- end }}
{{- end -}}

{{/* Non-empty when the password goes to the sentinels too: redis.sentinelAuth, a Sentinel URL. */}}
{{- define "mediator.redisSentinelAuth" -}}
{{- if and .Values.redis.sentinelAuth (contains "+sentinel" (first (regexSplit "://" .Values.redis.url 2))) -}}
true
{{- end -}}
{{- end -}}

{{/* redis.url with redis.username (if any) as the user info after the scheme, no password. */}}
{{- define "mediator.redisUrl" -}}
{{- $redis := .Values.redis -}}
{{- if $redis.username -}}
{{- $parts := regexSplit "://" $redis.url 2 -}}
{{- printf "%s://%s@%s" (index $parts 0) $redis.username (index $parts 1) -}}
{{- else -}}
{{- $redis.url -}}
{{- end -}}
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
- name: MEDIATOR_NOTIFY_WEBHOOK_SECRET_FILE
  value: {{ printf "%s/%s" $dir $n.webhook.secretKey | quote }}
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
(checkov.io/skipN: CHECK_ID=reason). (dict "context" $ "image" imageValues "secretEnv" why):
the image checks are skipped only while the values leave them unmet; CKV_K8S_35 (secrets as
files) only where a secret must be an environment variable ("url": the whole Redis URL from a
Secret).
*/}}
{{- define "mediator.checkovSkips" -}}
{{- $skips := list -}}
{{- if eq (toString .secretEnv) "url" -}}
{{- $skips = append $skips "CKV_K8S_35=redis.existingSecretUrlKey: the whole Redis URL, password inside, comes from the Secret as MEDIATOR_REDIS_URL, which the mediator reads from its environment only (a password alone is a file)" -}}
{{- end -}}
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

{{/* Whether the Redis URL is a Secret's whole value: "url", else "". */}}
{{- define "mediator.redisUrlSecret" -}}
{{- if and .Values.redis.existingSecret .Values.redis.existingSecretUrlKey -}}url{{- end -}}
{{- end -}}

{{/* A workload's metadata.annotations: its checkov skips and commonAnnotations (see checkovSkips). */}}
{{- define "mediator.workloadAnnotations" -}}
{{- $skips := include "mediator.checkovSkips" . | fromYaml -}}
{{- include "mediator.annotations" (dict "context" .context "annotations" $skips) | trim -}}
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
