"""Tests of what deploy/ builds: the OCI images, run for real with podman."""
