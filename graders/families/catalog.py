"""fleetgrade's own plugins: importing this module registers every built-in family.

It is the ``fleetgrade.plugins`` entry point of this distribution (pyproject.toml), which the
registry loads on its first lookup; nothing else needs to import it.
"""

from graders.families import builtin, trajectory  # noqa: F401  (graders; built-ins first: plan order)
from graders.families import (
    observed as observed,  # source fleetgrade: its own statement so it registers last; graded beside every plan
)
from graders.families.inline_js import sandbox  # noqa: F401  (the inline family's executor)
from graders.families.opvalue import executor  # noqa: F401  (the operational-value family's executor)
from graders.families.trace_rules import rules  # noqa: F401  (trace-grader's five rules)

# The input formats' readers (graders/formats: kind ``input_format``); sniffing is unambiguous,
# so their order (the families above may import some first) does not matter.
from graders.formats import (  # noqa: F401
    agy,
    aw_session,
    claude_code,
    claude_stream,
    codex,
    copilot,
    gemini,
    goose,
    hooks,
    opencode,
    otlp,
    pi,
)
from graders.formats.ghaw import reader  # noqa: F401  (gh-aw folders: the ``gh-aw`` format)
