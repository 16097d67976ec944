"""The hidden checks' CPU seconds per notebook, as a grading kernel pays them.

Each section's checks run on its solution in a fresh process, after the imports every
notebook makes anyway (torch, the course helpers, the solution's own code): what is timed
is the checks' own work, their first-time costs included (the first operation on PyTorch's
``meta`` device, for the fixed-device check, imports ``torch._dynamo``).
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench import ROOT
from grader.paths import section_of

TARGET_CPU_S = 2.0
#: The visible tests of a notebook, once PyTorch is warm: what a learner waits for.
TARGET_VISIBLE_CPU_S = 1.0
CODE = """
import gc, json, sys, time
import torch, course
from samples import graded_cells, load_solution_namespace, visible_test
from grader.checks import SECTIONS
namespace = load_solution_namespace(sys.argv[1])
start = time.process_time()
for exercise in SECTIONS[sys.argv[2]].EXERCISES.values():
    exercise.check(namespace[exercise.name])
hidden = time.process_time() - start
sources = [visible_test(sys.argv[1], name) for name in graded_cells(sys.argv[1])]
for source in sources:  # a first run of some operations loads code: not the tests' time
    exec(source, namespace)
gc.collect()  # a full collection of the notebook's heap is not the tests' time either
start = time.process_time()
for source in sources:
    exec(source, namespace)
print(json.dumps({"cpu_s": hidden, "visible_cpu_s": time.process_time() - start}))
"""


def bench_checks(assignments: list[str] | None = None, log=print) -> dict:
    """``{section: {"cpu_s", "meets_target", "visible_cpu_s", "visible_meets_target", targets}}``."""
    from grader.paths import assignment_names

    figures = {}
    for name in assignments or assignment_names(ROOT / "solutions"):
        section = section_of(name)
        run = subprocess.run([sys.executable, "-c", CODE, name, section], cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            figures[section] = {"cpu_s": None, "reason": run.stderr.strip().splitlines()[-1][:200]}
            continue
        measured = json.loads(run.stdout.strip().splitlines()[-1])
        cpu, visible = measured["cpu_s"], measured["visible_cpu_s"]
        figures[section] = {"cpu_s": round(cpu, 2), "target_cpu_s": TARGET_CPU_S,
                            "meets_target": cpu < TARGET_CPU_S,
                            "visible_cpu_s": round(visible, 2), "target_visible_cpu_s": TARGET_VISIBLE_CPU_S,
                            "visible_meets_target": visible < TARGET_VISIBLE_CPU_S}
        log(f"  checks: {section} {cpu:.2f} s of CPU, visible tests {visible:.2f} s")
    return figures
