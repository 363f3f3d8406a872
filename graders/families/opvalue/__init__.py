"""The operational-value grader (docs/reference/graders.md §3, §4, §10): a frozen Bash evaluator run in a sandbox.

Modules: ``freeze`` (freezing and digest checks), ``request`` (the stdin request), ``sandbox``
(bubblewrap + resource limits), ``launcher`` (the in-sandbox first process), ``output`` (stdout
validation, both protocols), ``executor`` (the engine's ``Executor`` for source
``operational-value``), ``regrade`` (the pure core of ``fleetgrade regrade --evidence-at``) and
``replay`` (a prepared run as the core's input, an observation as JSON).

Deliberate differences from the reference, and why:

- The reference runs ``/bin/bash`` directly on the workflow runner. We grade many repositories'
  evaluators on shared workers, so every run is sandboxed (``sandbox``) and has **no network**:
  an evaluator that queries the GitHub API gets an error, not a value. GH_TOKEN and the host
  variables are passed only when the caller configures them.
- The run subject comes from recorded run metadata, not from live ``GITHUB_*`` variables.
- Output over 1 MiB: the step surfaces Node's ``spawnSync … ENOBUFS``; we use the gh-aw CLI's
  wording, "<operation> output exceeded the 1048576-byte limit", and cap stderr the same way.
- "returned invalid JSON: <detail>": the detail is Python's parser message, not V8's.
- Freezing uses the Go compiler's messages ("graders.operational-value.script has invalid Bash
  syntax: …"); running uses the step's ("operational-value evaluator has invalid Bash syntax: …").
- The older attainment object is accepted only when the request carries an evidence time (a
  regrade), and keeps that design's [0,1] range; the newest metric array has no range check.
- Regrade does not re-read the evaluator at the recorded commit from a Git checkout, nor call the
  old ``--definition`` mode: both are the caller's (CLI's) business; the core checks the archived
  bytes against the manifest digest and the original result's ``implementation.digest``.
"""

from graders.families.opvalue.errors import OperationalValueError, SandboxUnavailableError

__all__ = ["OperationalValueError", "SandboxUnavailableError"]
