"""The operational-value grader (graders.md §3, §4, §10): a frozen Bash evaluator run in a sandbox.

Modules: ``freeze`` (freezing and digest checks), ``request`` (the stdin request), ``sandbox``
(bubblewrap + resource limits), ``output`` (stdout validation, both protocols), ``executor``
(the engine's ``Executor`` for source ``operational-value``) and ``regrade`` (the pure core of
``fleetgrade regrade --evidence-at``).
"""

from graders.opvalue.errors import OperationalValueError, SandboxUnavailableError

__all__ = ["OperationalValueError", "SandboxUnavailableError"]
