"""What makes nodes a cluster beyond the shared queues: who holds which live socket."""
