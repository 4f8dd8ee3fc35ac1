"""A real torchrun, default launch (its agent hosts the c10d store on MASTER_PORT), running a
torch script over "procgroup" on each plugin. Debian's torch 1.13 takes the underscore
spellings; --redirects 2 --tee 2 sidesteps a Python 3.11 problem in 1.13's output handling.

    PYTHONPATH=build/python /usr/bin/python3 tests/torch/test_torchrun.py
"""
import os
import socket
import subprocess
import sys
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun_script.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Torchrun(unittest.TestCase):
    def test_default_launch_runs_a_torch_script_over_each_plugin(self):
        for plugin in ["gloo", "ucx"]:
            env = dict(os.environ, PROCGROUP_BACKEND=plugin, PROCGROUP_TIMEOUT="60")
            run = subprocess.run(
                [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                 "--redirects", "2", "--tee", "2", "--master_port", str(free_port()), SCRIPT],
                env=env, capture_output=True, text=True, timeout=150)
            output = run.stdout + run.stderr
            self.assertEqual(run.returncode, 0, f"{plugin}:\n{output}")
            for rank in range(2):
                self.assertIn(f"rank {rank} of 2: ok (plugin {plugin}, "
                              "TORCHELASTIC_USE_AGENT_STORE=True)", output, output)
            self.assertNotIn("Address already in use", output)


if __name__ == "__main__":
    unittest.main()
