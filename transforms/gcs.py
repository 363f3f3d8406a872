"""GCS through Beam ``FileSystems`` against an emulator (``STORAGE_EMULATOR_HOST``).

google-cloud-storage honours ``STORAGE_EMULATOR_HOST``; Beam, however, first looks for
Application Default Credentials with retries and back-off (about 25 s) before connecting
anonymously. Against an emulator there are no credentials to find, so we settle Beam's
credential lookup to "anonymous" up front. Without the variable this module does nothing.
"""

from __future__ import annotations

import os


def use_emulator_if_configured() -> bool:
    if not os.environ.get("STORAGE_EMULATOR_HOST"):
        return False
    try:
        from apache_beam.internal.gcp import auth
    except ImportError:  # pragma: no cover - apache-beam[gcp] is a dependency
        return False
    # Beam caches the lookup in these two attributes (apache_beam/internal/gcp/auth.py).
    creds = auth._Credentials
    with creds._credentials_lock:
        creds._credentials = None
        creds._credentials_init = True
    return True
