"""``iket-tui completion SHELL``: completion scripts for bash, zsh and fish, made from the parser.

Every command, option and choice comes from the parser, so a script never lags behind it.
What a value is completed with follows from its metavar: a ``TARGET`` with the pids of this
user's live agents (the script asks ``iket-tui completion --list-targets`` each time), or for
a word that starts with a letter the hosts of ``~/.ssh/config`` as ``HOST:`` (``--list-hosts``), a
positional ``FILE`` with recordings (``*.msgpack``), an option's ``FILE`` or ``OUT`` with any
file, a ``DIR`` with directories, choices with themselves, anything else (a number) with
nothing. A positional that takes several words (``attach``'s pids) is completed again for each,
less the words already given; one that a flag widens (``repro --stuck`` also takes a live
TARGET) is completed with both once the flag is on the line. The words after ``run`` (or
``--``) are a program and its arguments; those after ``serve`` start with the command it
serves, and from its name on are completed as that command's, serve's own options added.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from iket_tui.cli.errors import UsageError
from iket_tui.endpoints import list_endpoints, process_argv
from iket_tui.sources.ssh import configured_hosts

SHELLS = ("bash", "zsh", "fish")
TARGET_COMMAND_WIDTH = 60
"""A live agent's command is cut to this many characters where a shell shows it beside the pid."""


class Completes(Enum):
    """What a value is completed with."""

    TARGETS = "targets"
    RECORDINGS = "recordings"
    TARGETS_OR_RECORDINGS = "targets-or-recordings"
    FILES = "files"
    DIRECTORIES = "directories"
    PROGRAM = "program"
    CHOICES = "choices"
    NOTHING = "nothing"


POSITIONALS = {"TARGET": Completes.TARGETS, "FILE": Completes.RECORDINGS}
OPTION_VALUES = {"FILE": Completes.FILES, "OUT": Completes.FILES, "DIR": Completes.DIRECTORIES}
FLAGGED_POSITIONALS = {("repro", "FILE"): ("--stuck", Completes.TARGETS_OR_RECORDINGS)}
"""Positionals that a flag on the line widens: ``repro --stuck`` takes a live TARGET as well as a
recording. A flag the command no longer has is an error when a script is made."""


@dataclass(frozen=True)
class Value:
    """A value a command line takes, and what completes it: ``repeats`` for a positional that
    takes several words (``attach``'s pids), ``flagged`` for one that a flag on the line makes
    complete otherwise (the flag, and what completes it then)."""

    completes: Completes
    choices: tuple[str, ...] = ()
    repeats: bool = False
    flagged: tuple[str, Completes] | None = None


@dataclass(frozen=True)
class Option:
    """An option: its names, its help, and its value (None for a flag)."""

    names: tuple[str, ...]
    help: str
    value: Value | None


@dataclass(frozen=True)
class Command:
    """A subcommand as the scripts complete it: options, positional values in order, what the
    rest of the line is (``run``'s program) if it takes one, and the commands it serves (``serve
    attach ...``), each completed as itself with the server's options added, named ``serve attach``."""

    name: str
    help: str
    options: tuple[Option, ...]
    positionals: tuple[Value, ...]
    rest: Value | None
    serves: tuple[Command, ...] = ()

    @property
    def valued(self) -> tuple[str, ...]:
        """The option names that take a value from the next word."""
        return tuple(name for option in self.options if option.value is not None for name in option.names)


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the completion script for a shell, or (``--list-targets``) the live agents the
    scripts offer as TARGET."""
    if args.list_targets:
        for line in target_lines():
            print(line)
        return 0
    if args.list_hosts:
        for host in configured_hosts(Path.home() / ".ssh" / "config"):
            print(f"{host}:")
        return 0
    if args.shell is None:
        raise UsageError("completion needs a shell: iket-tui completion bash|zsh|fish")
    from iket_tui.cli.parser import build_parser

    print(script(args.shell, build_parser()), end="")
    return 0


def target_lines() -> list[str]:
    """The live agents of this user, a pid, a tab and its command a line."""
    lines = []
    for endpoint in list_endpoints(listening_only=True):
        command = " ".join(" ".join(process_argv(endpoint.pid)).split()) or "?"
        if len(command) > TARGET_COMMAND_WIDTH:
            command = command[: TARGET_COMMAND_WIDTH - 3] + "..."
        lines.append(f"{endpoint.pid}\t{command}")
    return lines


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script of ``shell`` for ``parser``'s program."""
    top, commands = _commands(parser)
    prog = parser.prog
    if shell == "bash":
        return _bash(prog, top, commands)
    if shell == "zsh":
        return _zsh(prog, top, commands)
    if shell == "fish":
        return _fish(prog, top, commands)
    raise ValueError(shell)


# What the parser holds


def _commands(parser: argparse.ArgumentParser) -> tuple[tuple[Option, ...], tuple[Command, ...]]:
    """The program's own options, and its subcommands."""
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in subparsers._choices_actions}
    commands: dict[str, Command] = {}
    for name, sub in subparsers.choices.items():
        options = tuple(_option(action) for action in sub._actions if action.option_strings)
        positionals = [action for action in sub._actions if not action.option_strings]
        rest = next((action for action in positionals if action.nargs == argparse.REMAINDER), None)
        values = tuple(_positional(name, action, options) for action in positionals if action is not rest)
        commands[name] = Command(name, helps.get(name, ""), options, values, None if rest is None else _rest(rest))
    for name, command in commands.items():
        if command.rest is not None and command.rest.choices and set(command.rest.choices) <= commands.keys():
            serves = tuple(_served(command, commands[served]) for served in command.rest.choices)
            commands[name] = replace(command, serves=serves)
    top = tuple(_option(action) for action in parser._actions if action.option_strings)
    return top, tuple(commands.values())


def _served(server: Command, served: Command) -> Command:
    """``served`` as ``server`` runs it: its own options and those of the server, and one value
    for each positional (``serve attach`` shows one process)."""
    from iket_tui.cli.serve import REFUSED_UNDER_SERVE

    refused = REFUSED_UNDER_SERVE.get(served.name, frozenset()) if server.name == "serve" else frozenset()
    names = {name for option in served.options for name in option.names} | refused
    options = tuple(option for option in served.options if not set(option.names) & refused) + tuple(
        option for option in server.options if not set(option.names) & names
    )
    positionals = tuple(replace(value, repeats=False) for value in served.positionals)
    return Command(f"{server.name} {served.name}", served.help, options, positionals, served.rest)


def _option(action: argparse.Action) -> Option:
    help = action.help if isinstance(action.help, str) else ""
    if action.nargs == 0:
        return Option(tuple(action.option_strings), help, None)
    if action.choices is not None:
        return Option(tuple(action.option_strings), help, Value(Completes.CHOICES, tuple(map(str, action.choices))))
    completes = OPTION_VALUES.get(str(action.metavar), Completes.NOTHING)
    return Option(tuple(action.option_strings), help, Value(completes))


def _positional(command: str, action: argparse.Action, options: tuple[Option, ...]) -> Value:
    repeats = action.nargs in (argparse.ZERO_OR_MORE, argparse.ONE_OR_MORE)
    if action.choices is not None:
        return Value(Completes.CHOICES, tuple(map(str, action.choices)), repeats)
    flagged = FLAGGED_POSITIONALS.get((command, str(action.metavar)))
    if flagged is not None and not any(flagged[0] in option.names and option.value is None for option in options):
        raise ValueError(f"{command} has no flag {flagged[0]} to widen its {action.metavar}")
    return Value(POSITIONALS.get(str(action.metavar), Completes.NOTHING), (), repeats, flagged)


def _rest(action: argparse.Action) -> Value:
    """A rest of the line: a program (``-- CMD [ARGS...]``), or commands (``a|b|c ...``)."""
    metavar = str(action.metavar)
    if metavar.startswith("--"):
        return Value(Completes.PROGRAM)
    return Value(Completes.CHOICES, tuple(metavar.split()[0].split("|")))


_WORD = re.compile(r"^[A-Za-z0-9_.,:/+=-]+$")


def _word(text: str) -> str:
    """A command, option or choice, which the scripts hold unquoted."""
    if not _WORD.match(text):
        raise ValueError(f"not a plain word: {text!r}")
    return text


def _words(texts: tuple[str, ...] | list[str]) -> str:
    return " ".join(_word(text) for text in texts)


def _kind(value: Value | None) -> str:
    """A value as the scripts name what completes it: ``targets``, ``words:a b``, ..."""
    if value is None:
        return "nothing"
    if value.completes is Completes.CHOICES:
        return f"words:{_words(value.choices)}"
    return str(value.completes.value)


def _function(prog: str) -> str:
    return "_" + re.sub(r"\W", "_", prog)


# bash

_BASH_HEAD = """\
# bash completion for {prog}: add `source <({prog} completion bash)` to ~/.bashrc, or save it as
# ~/.local/share/bash-completion/completions/{prog}

{f}_offer() {{
    # $1: what completes the word (targets, recordings, targets-or-recordings, files, directories,
    # program, words:...), $2: the word so far, $3: the {prog} command (to ask it for the live agents)
    local IFS=$'\\n'
    case $1 in
        targets)
            if [[ $2 == */* ]]; then
                compopt -o filenames 2>/dev/null
                COMPREPLY=($(compgen -f -- "$2"))
            elif [[ $2 == [A-Za-z]* ]]; then
                COMPREPLY=($(compgen -W "$("$3" completion --list-hosts 2>/dev/null)" -- "$2"))
                ((${{#COMPREPLY[@]}})) && compopt -o nospace 2>/dev/null
            else
                COMPREPLY=($(compgen -W "$("$3" completion --list-targets 2>/dev/null | cut -f1)" -- "$2"))
            fi ;;
        recordings)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -X '!*.msgpack' -- "$2") $(compgen -d -- "$2")) ;;
        targets-or-recordings)
            {f}_offer recordings "$2" "$3"
            local -a recordings=("${{COMPREPLY[@]}}")
            COMPREPLY=()
            [[ $2 == */* ]] || {f}_offer targets "$2" "$3"
            COMPREPLY+=("${{recordings[@]}}") ;;
        files)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$2")) ;;
        directories)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -d -- "$2")) ;;
        program)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -c -- "$2")) ;;
        words:*)
            IFS=$' \\t\\n'
            COMPREPLY=($(compgen -W "${{1#words:}}" -- "$2")) ;;
    esac
}}

{f}_describe() {{
    # what the command $1 takes, set in the caller's variables: its options, those of them that
    # take a value, its positionals (the last one repeating when repeats=1), the rest of its line,
    # and the commands it serves
    case $1 in
"""

_BASH_MAIN = """\
        *) return 1 ;;
    esac
}}

{f}() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prog=${{COMP_WORDS[0]}} command="" at=0 i
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${{COMP_WORDS[i]}} != -* ]]; then
            command=${{COMP_WORDS[i]}}
            at=$i
            break
        fi
    done
    if [[ -z $command ]]; then
        if [[ $cur == -* ]]; then
            {f}_offer "words:{top_options}" "$cur"
        else
            {f}_offer "words:{commands}" "$cur"
        fi
        return
    fi
    local options="" valued="" rest="" served="" repeats=0 after=files word
    local -a positionals=() given=()
    {f}_describe "$command" || return
    if [[ -n $served ]]; then
        # the command served (serve attach ...) is completed as itself from its name on
        for ((i = at + 1; i < COMP_CWORD; i++)); do
            word=${{COMP_WORDS[i]}}
            if [[ $word == -* ]]; then
                [[ " $valued " == *" $word "* ]] && ((i++))
            else
                if [[ " $served " == *" $word "* ]]; then
                    command="$command $word" at=$i options="" valued="" rest="" served="" repeats=0 positionals=()
                    {f}_describe "$command"
                fi
                break
            fi
        done
    fi
    # which positional the word is, how far into the rest of the line, or an option's value
    local count=0 inrest=0
    for ((i = at + 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        if ((inrest)); then
            ((inrest++))
        elif [[ $word == -- && -n $rest ]]; then
            inrest=1
        elif [[ $word == -* ]]; then
            if [[ " $valued " == *" $word "* ]]; then
                if ((i + 1 == COMP_CWORD)); then
                    {f}_value "$command" "$word" "$cur" "$prog"
                    return
                fi
                ((i++))
            fi
        elif ((count < ${{#positionals[@]}})); then
            ((count++))
            ((count == ${{#positionals[@]}})) && given+=("$word")
        elif ((repeats)); then
            given+=("$word")
        elif [[ -n $rest ]]; then
            inrest=2
        fi
    done
    if ((inrest > 1)); then
        {f}_offer "$after" "$cur" "$prog"
    elif ((inrest)); then
        {f}_offer "$rest" "$cur" "$prog"
    elif [[ $cur == -* ]]; then
        {f}_offer "words:$options" "$cur"
    elif ((count < ${{#positionals[@]}})); then
        {f}_offer "${{positionals[count]}}" "$cur" "$prog"
    elif ((repeats)); then
        # the last positional again, less the words it was already given
        {f}_offer "${{positionals[-1]}}" "$cur" "$prog"
        local -a kept=()
        for word in "${{COMPREPLY[@]}}"; do
            [[ " ${{given[*]}} " == *" $word "* ]] || kept+=("$word")
        done
        COMPREPLY=("${{kept[@]}}")
    elif [[ -n $rest ]]; then
        {f}_offer "$rest" "$cur" "$prog"
    fi
}}

complete -F {f} {prog}
"""


def _bash(prog: str, top: tuple[Option, ...], commands: tuple[Command, ...]) -> str:
    f = _function(prog)
    lines = [_BASH_HEAD.rstrip("\n").format(prog=prog, f=f)]
    values = []
    for command in _every(commands):
        lines.append(f'        "{_words(command.name.split())}")')
        lines.append(f'            options="{_words([name for option in command.options for name in option.names])}"')
        if command.valued:
            lines.append(f'            valued="{_words(command.valued)}"')
        if command.positionals:
            lines.append(f"            positionals=({' '.join(repr(_kind(value)) for value in command.positionals)})")
            if command.positionals[-1].repeats:
                lines.append("            repeats=1")
        for n, value in enumerate(command.positionals):
            if value.flagged is not None:
                flag, completes = value.flagged
                lines.append(
                    f'            if [[ " ${{COMP_WORDS[*]:at}} " == *" {_word(flag)} "* ]]; then'
                    f" positionals[{n}]={completes.value!r}; fi"
                )
        if command.rest is not None:
            lines.append(f"            rest={_kind(command.rest)!r}")
        if command.serves:
            lines.append(f'            served="{_words([served.name.split()[-1] for served in command.serves])}"')
        lines.append("            ;;")
        for option in command.options:
            if option.value is not None:
                pattern = "|".join(f'"{command.name} {name}"' for name in option.names)
                values.append(f'        {pattern}) {f}_offer {_kind(option.value)!r} "$3" "$4" ;;')
    main = _BASH_MAIN.format(
        f=f,
        prog=prog,
        top_options=_words([name for option in top for name in option.names]),
        commands=_words([command.name for command in commands]),
    )
    value_function = [
        f"{f}_value() {{",
        "    # $1: the command, $2: the option, $3: the word so far, $4: the program",
        '    case "$1 $2" in',
        *values,
        "    esac",
        "}",
        "",
    ]
    return "\n".join(lines) + "\n" + main + "\n" + "\n".join(value_function)


def _every(commands: tuple[Command, ...]) -> list[Command]:
    """The commands, and after each one those it serves."""
    return [each for command in commands for each in (command, *command.serves)]


# zsh

_ZSH_HEAD = """\
#compdef {prog}
# zsh completion for {prog}: add `source <({prog} completion zsh)` to ~/.zshrc after compinit,
# or save it as _{prog} in a directory of $fpath

{f}_targets() {{
    # the last argument (after those of _arguments) is more for a further TARGET of a command that
    # takes several: those already given are left out
    local -a targets given kept
    local target tab=$'\\t'
    if [[ $PREFIX == [A-Za-z]* ]]; then
        compadd -S '' -- ${{(f)"$(${{{f}_prog:-{prog}}} completion --list-hosts 2>/dev/null)"}}
        return
    fi
    targets=(${{(f)"$(${{{f}_prog:-{prog}}} completion --list-targets 2>/dev/null)"}})
    if [[ ${{argv[-1]}} == more ]]; then
        given=(${{words[1,CURRENT-1]}} ${{words[CURRENT+1,-1]}})
        for target in $targets; do
            (( ${{given[(Ie)${{target%%$tab*}}]}} )) || kept+=($target)
        done
        targets=($kept)
    fi
    targets=(${{targets//:/\\\\:}})
    targets=(${{targets/$'\\t'/:}})
    _describe -t targets 'live agent' targets
}}

{f}_recordings() {{
    _files -g '*.msgpack'
}}

{f}_targets_or_recordings() {{
    _alternative 'targets:live agent:{f}_targets' 'recordings:recording:{f}_recordings'
}}

{f}_program() {{
    if [[ $words[1] == -- ]]; then
        shift words
        (( CURRENT-- ))
    fi
    _normal
}}

{f}_commands() {{
    local -a commands
    commands=(
{command_list}
    )
    _describe -t commands '{prog} command' commands
}}

{f}() {{
    local {f}_prog=$words[1] curcontext=$curcontext state state_descr line
    typeset -A opt_args
    _arguments -C \\
{top_specs}        '1:command:{f}_commands' \\
        '*::argument:->command'
    [[ $state == command ]] || return
    curcontext=${{curcontext%:*:*}}:{prog}-$words[1]:
    case $words[1] in
"""

_ZSH_TAIL = """\
    esac
}}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    {f} "$@"
else
    compdef {f} {prog}
fi
"""


def _zsh_text(text: str) -> str:
    """Help text as it stands in a single-quoted ``_arguments`` description."""
    return _zsh_quoted(text.replace("\\", "\\\\").replace("[", "(").replace("]", ")").replace(":", "\\:"))


def _zsh_quoted(text: str) -> str:
    """Text as it stands in single quotes."""
    return text.replace("'", "'\\''")


def _zsh_action(value: Value, f: str, completes: Completes | None = None) -> str:
    """What ``_arguments`` runs to complete ``value`` (as ``completes`` where a flag widens it)."""
    completes = value.completes if completes is None else completes
    if completes is Completes.CHOICES:
        return f"({_words(value.choices)})"
    return {
        Completes.TARGETS: f"{f}_targets",
        Completes.RECORDINGS: f"{f}_recordings",
        Completes.TARGETS_OR_RECORDINGS: f"{f}_targets_or_recordings",
        Completes.FILES: "_files",
        Completes.DIRECTORIES: "_files -/",
        Completes.PROGRAM: f"{f}_program",
        Completes.NOTHING: " ",
    }[completes]


def _zsh_specs(options: tuple[Option, ...], f: str) -> list[str]:
    specs = []
    for option in options:
        for name in option.names:
            spec = f"{_word(name)}[{_zsh_text(option.help)}]"
            if option.value is not None:
                spec += f":value:{_zsh_action(option.value, f)}"
            specs.append(f"'{spec}'")
    return specs


def _zsh_arguments(command: Command, f: str, flagged: bool) -> str:
    """The ``_arguments`` call of ``command``, its positionals widened by their flag if ``flagged``."""
    label = _word(command.name.split()[-1])
    specs = _zsh_specs(command.options, f)
    for n, value in enumerate(command.positionals, 1):
        completes = value.flagged[1] if flagged and value.flagged is not None else None
        action = _zsh_action(value, f, completes)
        if value.repeats and n == len(command.positionals):
            more = " more" if action == f"{f}_targets" else ""
            specs.append(f"'*:{label}:{action}{more}'")
        else:
            specs.append(f"'{n}:{label}:{action}'")
    if command.rest is not None:
        rest = command.rest
        if rest.completes is Completes.PROGRAM:
            specs.append(f"'*::program:{f}_program'")
        elif command.serves:
            specs.append(f"'{len(command.positionals) + 1}:command:{_zsh_action(rest, f)}'")
            specs.append("'*::served:->served'")
        else:
            specs.append(f"'{len(command.positionals) + 1}:command:{_zsh_action(rest, f)}'")
            specs.append("'*:file:_files'")
    options = "-C -S" if command.serves else "-S"
    return " \\\n    ".join([f"_arguments {options}", *specs])


def _zsh_branch(command: Command, f: str, prog: str) -> list[str]:
    """The lines that complete the words after ``command``: a flag that widens a positional
    chooses between two ``_arguments``; a command that serves others hands on to the one named."""
    flags = {value.flagged[0] for value in command.positionals if value.flagged is not None}
    if len(flags) > 1:
        raise ValueError(f"{command.name}: one flag may widen its positionals, not {sorted(flags)}")
    if flags:
        (flag,) = flags
        lines = [f"if (( ${{words[(I){_word(flag)}]}} )); then"]
        lines += _indent(_zsh_arguments(command, f, True).splitlines())
        lines.append("else")
        lines += _indent(_zsh_arguments(command, f, False).splitlines())
        lines.append("fi")
    else:
        lines = _zsh_arguments(command, f, False).splitlines()
    if command.serves:
        lines = ["state=", *lines, "[[ $state == served ]] || return"]
        lines.append("curcontext=${curcontext%:*}-$words[1]:")
        lines.append("case $words[1] in")
        for served in command.serves:
            lines += _indent([f"{_word(served.name.split()[-1])})", *_indent(_zsh_branch(served, f, prog)), ";;"])
        lines.append("esac")
    return lines


def _indent(lines: list[str], by: str = "    ") -> list[str]:
    return [by + line for line in lines]


def _zsh(prog: str, top: tuple[Option, ...], commands: tuple[Command, ...]) -> str:
    f = _function(prog)
    command_list = "\n".join(f"        '{_word(c.name)}:{_zsh_quoted(c.help)}'" for c in commands)
    top_specs = "".join(f"        {spec} \\\n" for spec in _zsh_specs(top, f))
    lines = [_ZSH_HEAD.rstrip("\n").format(prog=prog, f=f, command_list=command_list, top_specs=top_specs)]
    for command in commands:
        lines += _indent([f"{_word(command.name)})", *_indent(_zsh_branch(command, f, prog)), ";;"], "        ")
    return "\n".join(lines) + "\n" + _ZSH_TAIL.format(f=f, prog=prog)


# fish

_FISH_HEAD = """\
# fish completion for {prog}: `{prog} completion fish | source` in config.fish, or save it as
# ~/.config/fish/completions/{prog}.fish

function {f}_command --description 'the {prog} command on the line, and where it is'
    # a command that serves another (serve attach ...) is that one, named after both, from its name on
    set -l words (commandline -opc)
    for i in (seq 2 (count $words))
        if not string match -q -- '-*' $words[$i]
            set -l served
            set -l valued
            switch $words[$i]
{serving}
            end
            set -l skip 0
            for j in (seq (math $i + 1) (count $words))
                if test -z "$served"
                    break
                else if test $skip = 1
                    set skip 0
                else if string match -q -- '-*' $words[$j]
                    contains -- $words[$j] $valued
                    and set skip 1
                else
                    if contains -- $words[$j] $served
                        echo "$words[$i] $words[$j]"
                        echo $j
                        return 0
                    end
                    break
                end
            end
            echo $words[$i]
            echo $i
            return 0
        end
    end
    return 1
end

function {f}_using --description 'whether the command on the line is $argv[1]'
    set -l found ({f}_command)
    and test "$found[1]" = "$argv[1]"
end

function {f}_at --description 'whether the word typed is one of $argv[4..]'
    # what the word typed is: positional 1, 2, ..., rest (the first word of the rest of the line),
    # more (a later one), extra (one after the positionals where no rest follows them), value (an
    # option's) or none; given $argv[1]: the options that take a value, $argv[2]: how many
    # positionals, $argv[3]: 1 if a rest of the line follows them
    set -l found ({f}_command)
    or return 1
    set -l words (commandline -opc)
    set -l valued (string split ' ' -- $argv[1])
    set -l count 0
    set -l inrest 0
    set -l skip 0
    for i in (seq (math $found[2] + 1) (count $words))
        set -l word $words[$i]
        if test $skip = 1
            set skip 0
        else if test $inrest -gt 0
            set inrest (math $inrest + 1)
        else if test "$word" = -- -a $argv[3] = 1
            set inrest 1
        else if string match -q -- '-*' $word
            contains -- $word $valued
            and set skip 1
        else if test $count -lt $argv[2]
            set count (math $count + 1)
        else if test $argv[3] = 1
            set inrest 2
        end
    end
    set -l at none
    if test $skip = 1
        set at value
    else if test $inrest -gt 1
        set at more
    else if test $inrest = 1
        set at rest
    else if test $count -lt $argv[2]
        set at (math $count + 1)
    else if test $argv[3] = 1
        set at rest
    else
        set at extra
    end
    contains -- $at $argv[4..-1]
end

function {f}_recordings --description 'recordings (*.msgpack), and directories to look in'
    __fish_complete_path (commandline -ct) | string match -r -- '^.*(?:\\.msgpack|/)(?:\\t.*)?$'
end

function {f}_targets --description 'the live agents of this user, or HOST: of ~/.ssh/config'
    # given more: a further TARGET of a command that takes several, those on the line left out
    set -l words (commandline -opc)
    if string match -qr -- '^[A-Za-z]' (commandline -ct)
        $words[1] completion --list-hosts 2>/dev/null
    else if test "$argv[1]" = more
        for target in ($words[1] completion --list-targets 2>/dev/null)
            contains -- (string split -f1 \\t -- $target) $words[2..-1]
            or echo $target
        end
    else
        $words[1] completion --list-targets 2>/dev/null
    end
end

function {f}_targets_or_recordings --description 'the live agents, HOST: of ~/.ssh/config, and recordings'
    string match -q -- '*/*' (commandline -ct)
    or {f}_targets
    {f}_recordings
end

complete -c {prog} -f
"""


def _fish_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _fish_value(value: Value, f: str, completes: Completes | None = None) -> str:
    """The ``complete`` arguments that offer ``value`` (as ``completes`` where a flag widens it)."""
    completes = value.completes if completes is None else completes
    if completes is Completes.CHOICES:
        return f"-x -a '{_words(value.choices)}'"
    return {
        Completes.TARGETS: f"-x -a '({f}_targets)'",
        Completes.RECORDINGS: f"-x -a '({f}_recordings)'",
        Completes.TARGETS_OR_RECORDINGS: f"-x -a '({f}_targets_or_recordings)'",
        Completes.FILES: "-r -F",
        Completes.DIRECTORIES: "-x -a '(__fish_complete_directories)'",
        Completes.PROGRAM: "-x -a '(__fish_complete_command)'",
        Completes.NOTHING: "-x",
    }[completes]


def _fish_option(option: Option, condition: str, prog: str, f: str) -> str:
    names = " ".join(
        f"-l {_word(name[2:])}" if name.startswith("--") else f"-s {_word(name[1:])}" for name in option.names
    )
    value = "" if option.value is None else " " + _fish_value(option.value, f)
    return f"complete -c {prog} -n '{condition}' {names}{value} -d '{_fish_text(option.help)}'"


def _fish_positional(value: Value, n: int, last: bool, condition: str, at: str, prog: str, f: str) -> list[str]:
    """The ``complete`` lines of positional ``n``: for each word after it too where it repeats,
    and otherwise where its flag is on the line."""
    where = f"{at} {n} extra" if value.repeats and last else f"{at} {n}"
    if value.flagged is None:
        if value.repeats and last and value.completes is Completes.TARGETS:
            return [f"complete -c {prog} -n '{condition}; and {where}' -x -a '({f}_targets more)'"]
        return [f"complete -c {prog} -n '{condition}; and {where}' {_fish_value(value, f)}"]
    flag, completes = value.flagged
    on = f"contains -- {_word(flag)} (commandline -opc)"
    return [
        f"complete -c {prog} -n '{condition}; and {where}; and {on}' {_fish_value(value, f, completes)}",
        f"complete -c {prog} -n '{condition}; and {where}; and not {on}' {_fish_value(value, f)}",
    ]


def _fish(prog: str, top: tuple[Option, ...], commands: tuple[Command, ...]) -> str:
    f = _function(prog)
    serving = []
    for command in commands:
        if command.serves:
            serving.append(f"                case {_word(command.name)}")
            serving.append(f"                    set served {_words([s.name.split()[-1] for s in command.serves])}")
            serving.append(f"                    set valued {_words(command.valued)}")
    lines = [_FISH_HEAD.format(prog=prog, f=f, serving="\n".join(serving))]
    first = f"not {f}_command"
    for option in top:
        lines.append(_fish_option(option, first, prog, f))
    for command in commands:
        lines.append(f"complete -c {prog} -n '{first}' -a {_word(command.name)} -d '{_fish_text(command.help)}'")
    for command in _every(commands):
        using = f'{f}_using "{_words(command.name.split())}"'
        at = f'{f}_at "{_words(command.valued)}" {len(command.positionals)} {int(command.rest is not None)}'
        lines.append("")
        for option in command.options:
            lines.append(_fish_option(option, f"{using}; and not {at} rest more", prog, f))
        for n, value in enumerate(command.positionals, 1):
            lines += _fish_positional(value, n, n == len(command.positionals), using, at, prog, f)
        if command.rest is not None:
            lines.append(f"complete -c {prog} -n '{using}; and {at} rest' {_fish_value(command.rest, f)}")
            lines.append(f"complete -c {prog} -n '{using}; and {at} more' -F")
    return "\n".join(lines) + "\n"
