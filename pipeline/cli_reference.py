"""The CLI reference, `docs/reference/cli.md`: every verb of `dtfx` with its usage, its arguments and their choices,
defaults and help, written from the CLI's argparse parser (`dtfx.pipeline.cli._parser()`), so that it cannot drift.

`make docs` writes it; tests/test_config_reference.py fails when the page in the repository is not current.
"""

from __future__ import annotations

import argparse

HEADER = """# CLI reference

Every command of `dtfx` with its arguments, as `dtfx COMMAND --help` prints them. Written by `make docs` from the
CLI's parser; [the commands' guide](../guides/cli.md) shows them in use, with
examples.
"""

# The usage lines are wrapped at a fixed width, not the terminal's, so that the page is the same wherever it is made.
WIDTH = 100


def verbs(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Each verb of `parser`, in the order `dtfx --help` lists them: its one-line help and its own parser."""
    action = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {name: (helps.get(name, ""), sub) for name, sub in action.choices.items()}


def render(parser: argparse.ArgumentParser) -> str:
    """The whole page for the CLI's `parser`."""
    parts = [HEADER, "\n| command | what it does |\n|---|---|"]
    commands = verbs(parser)
    parts += [f"| [`dtfx {name}`](#dtfx-{name}) | {_cell(text)} |" for name, (text, _) in commands.items()]
    for name, (text, sub) in commands.items():
        parts.append(f"\n## `dtfx {name}`\n\n{_cell(_sentence(sub.description or text))}\n")
        parts.append("```\n" + _usage(sub) + "\n```\n")
        rows = [_row(sub, action) for action in sub._actions if action.help is not argparse.SUPPRESS
                and not isinstance(action, argparse._HelpAction)]
        if rows:
            parts.append("| argument | values | default | description |\n|---|---|---|---|\n" + "\n".join(rows))
    return "\n".join(parts).rstrip() + "\n"


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    name = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.choices is not None:
        values = ", ".join(f"`{choice}`" for choice in action.choices)
    elif action.nargs == 0:
        values = "flag"
    else:
        metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
        values = f"`{metavar}`" + (" ..." if action.nargs in ("*", "+", argparse.REMAINDER) else "")
    if action.required or (not action.option_strings and action.nargs not in ("?", "*")):
        default = "required"
    elif action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ()):
        default = ""
    else:
        default = f"`{action.default}`"
    described = parser._get_formatter()._expand_help(action) if action.help else ""
    values = values.replace("|", "\\|")
    return f"| {name} | {values} | {default} | {_cell(_sentence(described))} |"


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[:1].upper() + text[1:] if text else ""


def _cell(text: str) -> str:
    """`text` in a table's cell: no column break, and no `<name>` taken for HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;")


if __name__ == "__main__":
    from dtfx.pipeline.cli import _parser

    print(render(_parser()), end="")
