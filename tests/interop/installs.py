"""The interop peers' installers (interop/install-*.sh), run once per test session: each
installs into ~/.cache/mediator-interop on first use and answers at once afterwards."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def installed(peer: str, version: str | None = None) -> Path:
    """Run interop/install-<peer>.sh (with the version, for a peer whose installer takes
    one) and return the folder it installed into."""
    done = subprocess.run(
        [str(ROOT / "interop" / f"install-{peer}.sh"), *([version] if version else [])],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"installing {peer} {version or ''} failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])
