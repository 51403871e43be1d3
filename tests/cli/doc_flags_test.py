#!/usr/bin/env python3
"""Every flag the documentation gives a loom command is one that command knows.

Usage: doc_flags_test.py LOOM ROOT (the repository: its README.md and every docs/**/*.md)

A flag counts as documented for a command when it follows `loom <command>` on a command line
(in a code block or in backticks; a `\\` continues the line) or sits in the first column of a
flag table under a `## loom <command>` heading. Each is tried as `loom <command> --flag=x
--zz-end`: the flag parser reads flags in order and stops at the first problem, so a known flag
ends at `--zz-end` (or at a value it refuses) and an unknown one is named. Nothing runs.
"""
import concurrent.futures
import pathlib
import re
import subprocess
import sys

COMMANDS = ("train", "schedule", "launch", "doctor", "simulate", "plan", "profile",
            "checkpoint info", "checkpoint convert", "tokenizer train", "generate", "export",
            "import")
COMMAND_RE = re.compile(r"\bloom (" + "|".join(COMMANDS) + r")\b")
FLAG_RE = re.compile(r"(?<![\w-])--([a-z][a-z0-9._-]*)")
# Where a command line ends: a comment, a pipe or another command, the end of a backtick span.
END_RE = re.compile(r"\s#|\s\|\s|&&|;|`|\)\s")


def joined_lines(text):
    """The lines of `text` with shell continuations (a trailing backslash) joined."""
    out, cur = [], ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
        else:
            out.append(cur + line)
            cur = ""
    if cur:
        out.append(cur)
    return out


def documented(path):
    """(command, flag, where) for each flag the file gives a command."""
    found = []
    section = None
    for number, line in enumerate(joined_lines(open(path, encoding="utf-8").read()), 1):
        where = f"{path}:{number}"
        heading = re.match(r"##+ `?loom ([a-z]+)", line)
        if line.startswith("## "):
            section = heading.group(1) if heading else None
        # A flag table's first column, under a command's own heading.
        if section in COMMANDS and line.startswith("| `--"):
            for flag in FLAG_RE.findall(line.split("|")[1]):
                found.append((section, flag, where))
        for match in COMMAND_RE.finditer(line):
            rest = line[match.end():]
            stop = END_RE.search(rest)
            rest = rest[:stop.start()] if stop else rest
            rest = rest.split(" -- ")[0]  # launch: what follows is the command it runs
            for flag in FLAG_RE.findall(rest):
                found.append((match.group(1), flag, where))
    return found


def known(loom, command, flag):
    if flag == "help":  # every command's; it stops the parse, so it cannot be tried this way
        return True
    run = subprocess.run([loom, *command.split(), f"--{flag}=x", "--zz-end"],
                         capture_output=True, text=True)
    return f"unknown flag '--{flag}'" not in run.stderr


def main():
    loom, root = sys.argv[1], pathlib.Path(sys.argv[2])
    paths = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    found = [item for path in paths for item in documented(path)]
    keys = sorted({(command, flag) for command, flag, _ in found})
    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # each try is a loom start (~0.4 s)
        checked = dict(zip(keys, pool.map(lambda key: known(loom, *key), keys)))
    failures = [f"{where}: loom {command} has no flag --{flag}"
                for command, flag, where in found if not checked[(command, flag)]]
    for failure in failures:
        print("FAIL:", failure, file=sys.stderr)
    print(f"{len(checked)} documented flags of {len(paths)} files checked, "
          f"{len(failures)} unknown")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
