{{/*
A capacity CronJob: (dict "context" $ "component" "capacity-snapshot" "job" .Values.capacity.snapshot
"args" (list ...) "redis" true). Both jobs run one Spark driver in local mode in one pod, with
the nodes' settings (the ConfigMap) and /data from the capacity volume. With .redis (the
snapshot) the pod reads Redis as a worker does: MEDIATOR_REDIS_URL (mediator.redisEnv) and the
secret files of mediator.secretFiles, the Redis password and the key seed.
*/}}
{{- define "mediator.capacityCronJob" -}}
{{- $ := .context -}}
{{- $capacity := $.Values.capacity -}}
{{- $labels := dict "context" $ "component" .component -}}
{{- $secretFiles := list -}}
{{- $secretEnv := "" -}}
{{- if .redis -}}
{{- $secretFiles = include "mediator.secretFiles" (dict "context" $ "redis" true "tokens" false) | fromYamlArray -}}
{{- $secretEnv = include "mediator.redisUrlSecret" $ -}}
{{- end -}}
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {{ include "mediator.componentName" $labels }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "mediator.labels" $labels | nindent 4 }}
  {{- with include "mediator.workloadAnnotations" (dict "context" $ "image" $capacity.image "secretEnv" $secretEnv) }}{{ . | nindent 2 }}{{ end }}
spec:
  schedule: {{ .job.schedule | quote }}
  {{- with $capacity.timeZone }}
  timeZone: {{ . | quote }}
  {{- end }}
  concurrencyPolicy: {{ $capacity.concurrencyPolicy }}
  startingDeadlineSeconds: {{ $capacity.startingDeadlineSeconds }}
  successfulJobsHistoryLimit: {{ $capacity.successfulJobsHistoryLimit }}
  failedJobsHistoryLimit: {{ $capacity.failedJobsHistoryLimit }}
  jobTemplate:
    metadata:
      labels:
        {{- include "mediator.labels" $labels | nindent 8 }}
    spec:
      backoffLimit: {{ $capacity.backoffLimit }}
      activeDeadlineSeconds: {{ .job.activeDeadlineSeconds }}
      template:
        metadata:
          labels:
            {{- include "mediator.labels" $labels | nindent 12 }}
          annotations:
            {{- include "mediator.checksums" $ | nindent 12 }}
            {{- with $capacity.podAnnotations }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
        spec:
          {{- include "mediator.podCommon" $ | nindent 10 }}
          restartPolicy: Never
          {{- with $capacity.nodeSelector }}
          nodeSelector:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $capacity.affinity }}
          affinity:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $capacity.tolerations }}
          tolerations:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          containers:
            - name: {{ .component }}
              image: {{ include "mediator.image" (dict "context" $ "image" $capacity.image) }}
              imagePullPolicy: {{ $capacity.image.pullPolicy }}
              args:
                {{- toYaml .args | nindent 16 }}
              envFrom:
                - configMapRef:
                    name: {{ include "mediator.fullname" $ }}
              env:
                - name: HOME
                  value: /tmp
                {{- if .redis }}
                {{- include "mediator.redisEnv" (dict "context" $) | trim | nindent 16 }}
                {{- with include "mediator.secretFilesEnv" (dict "context" $ "files" $secretFiles) | trim }}{{ . | nindent 16 }}{{ end }}
                {{- end }}
                {{- with $capacity.extraEnv }}
                {{- toYaml . | nindent 16 }}
                {{- end }}
              resources:
                {{- toYaml $capacity.resources | nindent 16 }}
              securityContext:
                {{- toYaml $.Values.containerSecurityContext | nindent 16 }}
              volumeMounts:
                - name: tmp
                  mountPath: /tmp
                {{- with include "mediator.secretFilesMount" (dict "context" $ "files" $secretFiles) | trim }}{{ . | nindent 16 }}{{ end }}
                {{- if $capacity.persistence.enabled }}
                - name: data
                  mountPath: /data
                {{- end }}
          volumes:
            {{- include "mediator.tmpVolume" $capacity.tmpSizeLimit | nindent 12 }}
            {{- with include "mediator.secretFilesVolume" (dict "context" $ "files" $secretFiles) | trim }}{{ . | nindent 12 }}{{ end }}
            {{- if $capacity.persistence.enabled }}
            - name: data
              persistentVolumeClaim:
                claimName: {{ default (include "mediator.componentName" (dict "context" $ "component" "capacity")) $capacity.persistence.existingClaim }}
            {{- end }}
{{- end -}}

{{/* Where the history is: capacity.historyUrl, else history/ on the volume. */}}
{{- define "mediator.capacityHistory" -}}
{{- default "/data/history" .Values.capacity.historyUrl -}}
{{- end -}}
