"""Beam's own gRPC servers bound to loopback.

Upstream (Beam 2.77): the FnApiRunner's control, data, state and logging servers (started for
``direct-multiprocess`` and inside a portable job service), the job service's logging server and
the external worker pool bind ``[::]:PORT``, every interface, although every client of theirs
connects to ``localhost``. Unauthenticated servers that hand out work and state have no business
on the network: :func:`loopback_grpc` makes this process's gRPC servers bind ``localhost`` instead.
"""

from __future__ import annotations

from typing import Any

_WILDCARDS = ("[::]:", "0.0.0.0:")


def loopback_grpc() -> None:
    """Every gRPC server of this process binds ``localhost:PORT`` where it asked for a wildcard
    address (idempotent). The port is kept, so a fixed ``--service_port`` stays fixed."""
    from grpc import _server

    server_class: Any = _server._Server
    if getattr(server_class, "_fleetgrade_loopback", False):
        return
    bind = server_class.add_insecure_port

    def add_insecure_port(self: Any, address: str) -> int:
        for wildcard in _WILDCARDS:
            if address.startswith(wildcard):
                address = "localhost:" + address.removeprefix(wildcard)
        return int(bind(self, address))

    server_class.add_insecure_port = add_insecure_port
    server_class._fleetgrade_loopback = True


if __name__ == "__main__":  # python -m pipeline.runners.loopback MODULE ARGS…: run a Beam main on loopback
    import runpy
    import sys

    loopback_grpc()
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
