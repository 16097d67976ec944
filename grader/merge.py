"""Combine the outputs of sharded runs: ``python -m grader merge OUT1 OUT2 ... --out OUT``.

Every shard's ``manifest.json`` lists the whole batch (all students and assignments) and
which slice it graded, so the merge can check that the shards are the N slices of one
batch and that every submission has a result, before writing the same grades.csv (and class
report) an unsharded run writes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from grader import results as report
from grader.autograde.host.out_folder import Out, read_not_graded
from grader.errors import MergeError
from grader.report import write_report


def read_manifest(out: Path) -> dict:
    path = out / "manifest.json"
    if not path.is_file():
        raise MergeError(f"{out} has no manifest.json: is it the --out folder of an "
                         "autograde run?")
    return json.loads(path.read_text())


def check_shards(outs: list[Path], manifests: list[dict]) -> None:
    """The outputs must be slices 1..N of the same batch, each once."""
    first = manifests[0]
    for out, manifest in zip(outs, manifests):
        if manifest["keys"] != first["keys"]:
            raise MergeError(f"{out} graded another batch than {outs[0]} (different students "
                             "or assignments): merge outputs of one submissions folder only.")
    total = first["shard"][1]
    seen = sorted(m["shard"][0] for m in manifests)
    if any(m["shard"][1] != total for m in manifests) or seen != list(range(1, total + 1)):
        missing = sorted(set(range(1, total + 1)) - set(seen))
        raise MergeError(f"Expected the shards 1..{total} once each, got {seen}"
                         + (f"; run the missing --shard {', '.join(f'{k}/{total}' for k in missing)}"
                            if missing else ""))


def copy_tree(source: Path, dest: Path) -> None:
    if source.is_dir() and source.resolve() != dest.resolve():
        shutil.copytree(source, dest, dirs_exist_ok=True)


def merge(outs: list[Path], dest: Path) -> Path:
    """Merge shard outputs into ``dest``; returns the path of the merged grades.csv."""
    manifests = [read_manifest(out) for out in outs]
    check_shards(outs, manifests)
    keys = [tuple(k) for k in manifests[0]["keys"]]
    kept = sorted({tuple(k) for m in manifests for k in m.get("kept", [])} - set(keys))
    results: dict[tuple[str, str], report.Result] = {}
    for out in outs:
        found = report.load_results(out)
        results.update({k: r for k, r in found.items() if k in set(keys) | set(kept)})
    kept = [k for k in kept if k in results]
    missing = [f"{s}/{a}" for s, a in keys if (s, a) not in results]
    if missing:
        total = manifests[0]["shard"][1]
        rerun = sorted({i % total + 1 for i, k in enumerate(sorted(keys)) if k not in results})
        raise MergeError(f"No result for {len(missing)} submission(s), e.g. {missing[:3]}: "
                         f"rerun --shard {', '.join(f'{k}/{total}' for k in rerun)} into the "
                         "same --out (it resumes), then merge again.")
    dest.mkdir(parents=True, exist_ok=True)
    for out in outs:
        for part in ("results", "feedback", "autograded", "logs"):
            copy_tree(out / part, dest / part)
    manifest = {**manifests[0], "shard": [1, 1], "kept": [list(k) for k in kept],
                "merged_from": [str(o) for o in outs]}
    report.atomic_write(dest / "manifest.json", json.dumps(manifest, indent=1))
    listed: dict[str, dict[str, str]] = {}
    for out in outs:  # every shard unpacked the whole batch: the same files, said once
        for row in read_not_graded(out):
            listed.setdefault(row["batch"], {})[row["file"]] = row["why"]
    for batch, files in listed.items():
        Out(dest, manifests[0]["exercises"]).write_not_graded(batch, files)
    rows = [results[k] for k in [*keys, *kept]]
    path = report.write_grades(dest, rows, manifests[0]["exercises"])
    write_report(dest, rows, manifests[0]["exercises"])
    return path
