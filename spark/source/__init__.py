"""How the snapshot reads Redis: which servers hold which shards (topology), a partition's
command budget (pacing), batched round trips (wire), the per-shard reads (reader) and the
PySpark Python Data Source that runs them in parallel (redis_source)."""
