#!/usr/bin/env python3
"""check_docs.py against a small made-up tree: it must pass a tree whose docs match its
code, and name each kind of mismatch (a flag the program lacks, a variable the code never
mentions, a variable the code reads that no page documents)."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_docs.py")

TOOL_HELP = """\
tool: a made-up program.
Usage: tool [OPTIONS]

Options:
  -h,--help                   Print this help message and exit
  --epochs INT=10             Epochs
  -b,--minbytes UINT          Smallest size
"""


def write(root, name, text):
    path = os.path.join(root, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


class CheckDocs(unittest.TestCase):
    def tree(self, readme, code):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        write(root, "README.md", readme)
        write(root, "docs/other.md", "Nothing here.\n")
        write(root, "src/env.cc", code)
        tool = write(root, "bin/tool", "#!/bin/sh\ncat <<'EOF'\n" + TOOL_HELP + "EOF\n")
        os.chmod(tool, 0o755)
        return root, tool

    def check(self, root, tool):
        return subprocess.run([sys.executable, CHECK, "--source", root, "--tool",
                               "tool=" + tool], capture_output=True, text=True, timeout=60)

    def test_matching_docs_pass(self):
        root, tool = self.tree(
            "```sh\nbin/tool --epochs 2 -b 8\n```\nSet `PROCGROUP_KNOB` to tune it.\n",
            'const char* v = getenv("PROCGROUP_KNOB");\n')
        r = self.check(root, tool)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_flags_after_a_bare_double_dash_are_passed_on(self):
        root, tool = self.tree("```sh\nbin/tool --epochs 2 -- -z 1 --other\n```\n", "")
        r = self.check(root, tool)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_each_mismatch_is_named(self):
        root, tool = self.tree(
            "```sh\nbin/tool --epoch 2\n```\nRun `tool -z 1`; set `PROCGROUP_GONE`.\n",
            'const char* v = getenv("PROCGROUP_SECRET");\n')
        r = self.check(root, tool)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("README.md:2: tool has no flag --epoch", r.stdout)
        self.assertIn("README.md:4: tool has no flag -z", r.stdout)
        self.assertIn("README.md:4: PROCGROUP_GONE appears nowhere in the code", r.stdout)
        self.assertIn("src/env.cc: reads PROCGROUP_SECRET, which no Markdown file documents",
                      r.stdout)


if __name__ == "__main__":
    unittest.main()
