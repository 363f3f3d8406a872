"""Install the system tools fleetgrade's sandboxes and browser tests need (``make system-deps``).

bubblewrap (operational-value sandbox), bash and jq (evaluators), chromium (report tests), ss
(iproute2: the tests check that servers listen on loopback only).
Installs through apt when running as root on Debian/Ubuntu; otherwise reports what is missing
so the relevant graders fail closed with a clear error rather than running unsandboxed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

TOOLS = {"bwrap": "bubblewrap", "jq": "jq", "chromium": "chromium", "prlimit": "util-linux", "ss": "iproute2"}


def missing_packages() -> list[str]:
    return sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})


def main() -> int:
    missing = missing_packages()
    if not missing:
        print("system-deps: bubblewrap, jq, chromium present")
        return 0
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"system-deps: missing {', '.join(missing)} (install them as root; sandboxed graders fail closed)")
        return 0
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"system-deps: installing {', '.join(missing)}")
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, stdout=subprocess.DEVNULL)
    proc = subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
        env=env, stdout=subprocess.DEVNULL, check=False,
    )
    still = missing_packages()
    if proc.returncode != 0 or still:
        print(f"system-deps: could not install {', '.join(still) or missing}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
