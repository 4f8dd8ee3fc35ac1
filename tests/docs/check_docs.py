#!/usr/bin/env python3
"""Checks that the documentation matches the code.

1. Every flag a command line in README.md or docs/*.md passes to one of our programs
   (pgrun, collbench, mpi_collbench, fashion_mnist, bench/scripts/*.sh) is in that
   program's --help, and every flag the prose names on its own (`--sync-bn`) is in the
   --help of one of them or of a listed outside tool (torchrun, mpirun, cmake, ...).
2. Every PROCGROUP_* name the documentation mentions appears in the source tree's code, and
   every PROCGROUP_* environment variable the code outside tests/ reads is documented in
   some Markdown file of the repository.

The --help texts are read from the built programs at test time, so the check follows
their flags as they change.

  check_docs.py --source DIR --tool pgrun=PATH --tool collbench=PATH ...
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

# Flags of programs that are not ours, which the documentation shows being used.
OUTSIDE_FLAGS = {
    "torchrun": {"--nproc-per-node", "--nproc_per_node", "--no-python", "--no_python",
                 "--redirects", "--tee", "--standalone", "--nnodes", "--node_rank",
                 "--rdzv-backend", "--rdzv-endpoint", "--master_addr", "--master_port"},
    "mpirun": {"-np", "--allow-run-as-root", "--oversubscribe", "--mca", "-H", "--host"},
    "srun": {"-N", "--ntasks-per-node"},
    "cmake/ctest": {"--preset", "--build", "--target", "--install", "--prefix", "-B", "-S",
                    "-D", "-j", "--test-dir", "-L", "-R", "-E", "--output-on-failure", "-LE",
                    "--parallel", "--config"},
    "chrt/nice/taskset": {"-f", "-n", "-c"},
    "python3": {"-m"},
    "bench/torch_ddp.py": {"--steps", "--warmup", "--repeats", "--sizes", "--configs",
                           "--markdown", "--json", "--quick"},
    "gnuplot/apt": {"--help", "-h"},
}

FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]*$")
VAR = re.compile(r"\bPROCGROUP_[A-Z0-9_]*[A-Z0-9]\b")
SHELL_BREAKS = {"|", "||", "&&", ";", ">", ">>", "2>", "<", "&", "\\"}


def run_help(path):
    if not os.access(path, os.X_OK):
        sys.exit(f"check_docs: {path} is not built (build it first: the check reads its --help)")
    out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
    return out.stdout + out.stderr


def parse_help(text):
    """Flags in a --help text, and which of them take a value (CLI11: a TYPE after the names)."""
    flags, takes_value = set(), set()
    for line in text.splitlines():
        m = re.match(r"^\s+(-\S.*?)(?:\s{2,}|$)", line)
        if m:
            spec = m.group(1)
            names = re.findall(r"(?<![\w-])--?[A-Za-z][A-Za-z0-9_-]*", spec)
            flags.update(names)
            if re.search(r"\b(INT|UINT|TEXT|FLOAT|SIZE|FILE|DIR|N|PATH)\b", spec):
                takes_value.update(names)
        else:  # a script's usage line: "sweep_plot.sh [-o DIR] [--no-mpi]"
            for flag, value in re.findall(r"\[(--?[A-Za-z][A-Za-z0-9_-]*)( [A-Z]+)?\]", line):
                flags.add(flag)
                if value:
                    takes_value.add(flag)
    return flags, takes_value


def doc_files(source):
    files = [os.path.join(source, "README.md")]
    docs = os.path.join(source, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return files


def code_lines(text):
    """Command-like text of a Markdown file: lines of fenced blocks and inline code spans,
    each with whether it is a fenced line (a command) and its line number."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            yield True, line.split(" #")[0], number
        else:
            for span in re.findall(r"`([^`]+)`", line):
                yield False, span, number


def split_words(text):
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


def check_commands(path, text, tools, known, problems):
    """A flag after one of our programs' names belongs to it (pgrun's end where the program
    it starts begins, anyone's at a bare `--`); a code span that is only flags (`--sync-bn`) is checked against every
    program's flags and the outside tools'."""
    for fenced, code, number in code_lines(text):
        words = split_words(code)
        if not words:
            continue
        tool, mentioned_tool = None, False
        for i, word in enumerate(words):
            name = os.path.basename(word)
            if name in tools:
                tool, mentioned_tool = name, True
                continue
            # A bare `--` ends the program's own options: what follows it passes through.
            if word in SHELL_BREAKS or word == "--" or re.match(r"^\d*>", word):
                tool = None
                continue
            if tool is None:
                continue
            flag = word.split("=", 1)[0]
            if not FLAG.match(flag):
                # pgrun's first word that is no flag's value is the program it starts.
                prev = words[i - 1].split("=", 1)[0]
                if tool == "pgrun" and not (prev in tools[tool][1] and "=" not in words[i - 1]):
                    tool = None
                continue
            if flag not in tools[tool][0]:
                problems.append(f"{path}:{number}: {tool} has no flag {flag} "
                                f"(not in its --help): {code.strip()}")
        if not fenced and not mentioned_tool and FLAG.match(words[0]):
            for word in words:
                flag = word.split("=", 1)[0]
                if FLAG.match(flag) and flag not in known:
                    problems.append(f"{path}:{number}: no program here has the flag {flag}: "
                                    f"`{code}`")


CODE = re.compile(r"\.(c|cc|h|hpp|cu|py|sh|cmake|in)$|(^|/)CMakeLists\.txt$")
MARKDOWN = re.compile(r"\.md$")


def source_files(source, skip_tests, kind=CODE):
    out = subprocess.run(["git", "-C", source, "ls-files", "--cached", "--others",
                          "--exclude-standard"], capture_output=True, text=True)
    names = out.stdout.split() if out.returncode == 0 else []
    if not names:  # not a git checkout (a source tarball): walk it
        for root, dirs, files in os.walk(source):
            dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
            names += [os.path.relpath(os.path.join(root, f), source) for f in files]
    for name in names:
        if kind.search(name) and not (skip_tests and name.startswith("tests/")):
            if os.path.isfile(os.path.join(source, name)):
                yield name


def read(source, name):
    with open(os.path.join(source, name), encoding="utf-8", errors="replace") as f:
        return f.read()


def env_reads(name, text):
    """PROCGROUP_* environment variables a source file reads: quoted names in C, C++ and
    Python, $NAME / ${NAME in shell scripts."""
    if name.endswith(".sh"):
        return set(re.findall(r"\$\{?(PROCGROUP_[A-Z0-9_]*[A-Z0-9])", text))
    if name.endswith((".c", ".cc", ".h", ".hpp", ".cu", ".py")):
        return set(re.findall(r"[\"'](PROCGROUP_[A-Z0-9_]*[A-Z0-9])[\"']", text))
    return set()


def check_variables(source, docs_text, all_markdown, problems):
    code_text = {n: read(source, n) for n in source_files(source, skip_tests=False)}
    in_code = set()
    for text in code_text.values():
        in_code.update(VAR.findall(text))
    for path, text in docs_text.items():
        for number, line in enumerate(text.splitlines(), 1):
            for var in sorted(set(VAR.findall(line))):
                if var not in in_code:
                    problems.append(f"{path}:{number}: {var} appears nowhere in the code")
    documented = set()
    for text in all_markdown:
        documented.update(VAR.findall(text))
    for name, text in sorted(code_text.items()):
        if name.startswith("tests/"):
            continue
        for var in sorted(env_reads(name, text) - documented):
            problems.append(f"{name}: reads {var}, which no Markdown file documents")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="the source tree")
    parser.add_argument("--tool", action="append", default=[], metavar="NAME=PATH",
                        help="one of our programs and the path of its built binary or script")
    args = parser.parse_args()
    tools = {}
    for item in args.tool:
        name, path = item.split("=", 1)
        text = run_help(path)
        if "usage" not in text.lower() and name not in text:
            sys.exit(f"check_docs: '{path} --help' printed no usage:\n{text}")
        tools[name] = parse_help(text)
    known = set().union(*(flags for flags, _ in tools.values()), *OUTSIDE_FLAGS.values())

    problems = []
    docs_text = {}
    for path in doc_files(args.source):
        docs_text[os.path.relpath(path, args.source)] = read(args.source, path)
    for path, text in docs_text.items():
        check_commands(path, text, tools, known, problems)
    markdown = [read(args.source, n) for n in source_files(args.source, False, MARKDOWN)]
    check_variables(args.source, docs_text, markdown, problems)
    for p in problems:
        print(p)
    print(f"check_docs: {len(problems)} problem(s) in {len(docs_text)} files, "
          f"{len(tools)} programs' --help")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
