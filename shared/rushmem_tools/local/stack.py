"""Where the stack's files are: template.yaml, the handlers (functions/*/app.py) and events/.

``serve``, ``invoke`` and ``demo`` run the handlers the template names. In a checkout they are the
checkout's files; an installed wheel carries a copy under ``rushmem_tools/stack`` (setup.py
copies them at build time), so the commands work from any directory.
"""

from __future__ import annotations

from pathlib import Path

from rushmem_contract.errors import ConfigurationError

TEMPLATE = "template.yaml"
# In a wheel: the copy made by setup.py. In a checkout (an editable install): none, the checkout is found.
PACKAGED = Path(__file__).resolve().parents[1] / "stack"
CHECKOUT = Path(__file__).resolve().parents[3]
TEMPLATE_HELP = "the SAM template (default: ./template.yaml, else the one rushmem carries)"


def stack_root() -> Path:
    """The directory holding template.yaml: the current one (a checkout, or a user's own copy of the
    stack), else the checkout this package runs from, else the copy the installed package carries."""
    for candidate in (Path.cwd(), CHECKOUT, PACKAGED):
        if (candidate / TEMPLATE).is_file():
            return candidate
    raise ConfigurationError(
        f"no {TEMPLATE} here, in {CHECKOUT} or in the installed package ({PACKAGED}): reinstall rushmem "
        "from a wheel or a checkout, or pass --template PATH"
    )


def template_path(given: str | Path | None) -> Path:
    """The template a command runs: ``given`` (``--template``) when set, else the one :func:`stack_root` finds."""
    if given is None:
        return stack_root() / TEMPLATE
    path = Path(given)
    if not path.is_file():
        raise ConfigurationError(f"no SAM template at {path} (omit --template to use the one rushmem carries)")
    return path


def event_path(given: str | Path) -> Path:
    """An event file: ``given`` as is when it exists, else the same relative path among the stack's
    events (``events/conversation-ended.json`` works from any directory)."""
    path = Path(given)
    if path.exists() or path.is_absolute():
        return path
    try:
        packaged = stack_root() / path
    except ConfigurationError:
        return path
    return packaged if packaged.exists() else path
