{{/*
Checks of values that the schema cannot express. Every failed check adds a sentence; the render
fails once, listing all of them.
*/}}
{{- define "mediator.validateValues" -}}
{{- $messages := list -}}
{{- $messages = append $messages (include "mediator.validate.redisUrl" . | trim) -}}
{{- $messages = append $messages (include "mediator.validate.redisPassword" . | trim) -}}
{{- $messages = append $messages (include "mediator.validate.gracePeriod" . | trim) -}}
{{- $messages = append $messages (include "mediator.validate.preStopAction" . | trim) -}}
{{- $messages = append $messages (include "mediator.validate.configSecrets" . | trim) -}}
{{- $messages = append $messages (include "mediator.validate.capacity" . | trim) -}}
{{- $messages = append $messages (include "mediator.validate.autoscaling" . | trim) -}}
{{- $messages = append $messages (include "mediator.validate.notifications" . | trim) -}}
{{- $messages = without $messages "" -}}
{{- if $messages -}}
{{- printf "\nVALUES VALIDATION:\n%s" (join "\n" $messages) | fail -}}
{{- end -}}
{{- end -}}

{{- define "mediator.validate.redisUrl" -}}
{{- $redis := .Values.redis -}}
{{- if and $redis.existingSecretUrlKey (not $redis.existingSecret) -}}
redis.existingSecretUrlKey: names a key of redis.existingSecret, which is not set.
{{- else if not (and $redis.existingSecret $redis.existingSecretUrlKey) -}}
{{- if not $redis.url -}}
redis.url: the nodes need a Redis, and none is given. Set redis.url (e.g. redis://my-redis-master:6379/0, redis+sentinel://my-redis:26379/mymaster or redis+cluster://my-redis-cluster:6379), or redis.existingSecret with redis.existingSecretUrlKey.
{{- else if not (regexMatch "^(rediss?(\\+(sentinel|cluster))?|unix)://" $redis.url) -}}
redis.url: {{ $redis.url | quote }} is not a Redis URL: it must start with redis://, rediss://, redis+sentinel://, redis+cluster:// (rediss+… for TLS) or unix://.
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "mediator.validate.redisPassword" -}}
{{- $redis := .Values.redis -}}
{{- $hasPassword := not (empty (include "mediator.redisPasswordRef" .)) -}}
{{- $urlFromSecret := and $redis.existingSecret $redis.existingSecretUrlKey -}}
{{- if and $redis.password $redis.existingSecret -}}
redis.password and redis.existingSecret: give the password one way only.
{{- else if and (not $urlFromSecret) (or $hasPassword $redis.username) (contains "@" $redis.url) -}}
redis.url: holds user info (…@host) while {{ if $hasPassword }}the password comes from {{ ternary "redis.existingSecret" "redis.password" (not (empty $redis.existingSecret)) }}{{ else }}redis.username names the user{{ end }}; give the URL without it (the user goes in redis.username).
{{- else if and $hasPassword (hasPrefix "unix://" $redis.url) -}}
redis.url: a unix:// URL cannot carry a password here; pods reach Redis over TCP (redis://).
{{- end -}}
{{- end -}}

{{- define "mediator.validate.gracePeriod" -}}
{{- $node := .Values.node -}}
{{- $needed := addf $node.preStopSeconds $node.drainSeconds 5 -}}
{{- if lt (float64 $node.terminationGracePeriodSeconds) $needed -}}
node.terminationGracePeriodSeconds: {{ $node.terminationGracePeriodSeconds }} is too short: Kubernetes kills a node after it, so it must be at least node.preStopSeconds ({{ $node.preStopSeconds }}) + node.drainSeconds ({{ $node.drainSeconds }}) + 5 s of margin = {{ $needed }}; raise it or shorten the drain.
{{- end -}}
{{- end -}}

{{- define "mediator.validate.preStopAction" -}}
{{- if not (has .Values.node.preStopAction (list "sleep" "exec")) -}}
node.preStopAction: {{ .Values.node.preStopAction | quote }} is neither "sleep" nor "exec".
{{- end -}}
{{- end -}}

{{- define "mediator.validate.configSecrets" -}}
{{- $secret := list "KEY_SEED" "API_TOKENS" "REDIS_URL" "REDIS_PASSWORD" "NOTIFY_WEBHOOK_SECRET" -}}
{{- range $name, $_ := .Values.config.extra -}}
{{- if has (upper $name | trimPrefix "MEDIATOR_") $secret -}}
config.extra.{{ $name }}: is a secret and would land in the ConfigMap; use auth.keySeed, auth.apiTokens, redis.url with redis.password, their existingSecret values, or notifications.webhook.secretKey.
{{ end -}}
{{- end -}}
{{- end -}}

{{- define "mediator.validate.capacity" -}}
{{- $capacity := .Values.capacity -}}
{{- if $capacity.enabled -}}
{{- if and $capacity.report.enabled (not $capacity.persistence.enabled) -}}
capacity.report.enabled: the report writes report.html to the volume, so it needs capacity.persistence.enabled (or turn the report off).
{{- else if and (not $capacity.persistence.enabled) (not $capacity.historyUrl) -}}
capacity.persistence.enabled: without a volume the snapshots need capacity.historyUrl (an object store) to write to.
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "mediator.validate.autoscaling" -}}
{{- $hpa := .Values.node.autoscaling -}}
{{- if and $hpa.enabled (gt (int $hpa.minReplicas) (int $hpa.maxReplicas)) -}}
node.autoscaling.minReplicas ({{ $hpa.minReplicas }}) is above node.autoscaling.maxReplicas ({{ $hpa.maxReplicas }}).
{{- end -}}
{{- end -}}

{{- define "mediator.validate.notifications" -}}
{{- $n := .Values.notifications -}}
{{- $keys := list $n.fcmCredentialsKey $n.apns.keyKey $n.webhook.secretKey $n.appsKey | compact -}}
{{- if and $keys (not $n.existingSecret) -}}
notifications: {{ join ", " $keys }} name keys of notifications.existingSecret, which is not set.
{{- else if and $n.existingSecret (not (or $n.fcmCredentialsKey $n.apns.keyKey $n.webhook.url $n.appsKey)) -}}
notifications.existingSecret: set, but no provider uses it: give fcmCredentialsKey, apns.keyKey, webhook.url or appsKey.
{{- else if and $n.apns.keyKey (not (and $n.apns.keyId $n.apns.teamId $n.apns.topic)) -}}
notifications.apns: the auth key needs keyId, teamId and topic (the app's bundle id).
{{- else if and $n.webhook.url (not $n.webhook.secretKey) -}}
notifications.webhook.url: needs webhook.secretKey, the key of its HMAC secret in notifications.existingSecret.
{{- else if not (has $n.apns.environment (list "production" "sandbox")) -}}
notifications.apns.environment: {{ $n.apns.environment | quote }} is neither "production" nor "sandbox".
{{- end -}}
{{- end -}}
