#!/bin/bash
# Grade a class on a SLURM cluster: an array of N shards, then one merge job.
#
#   sbatch --export=ALL,DEADLINE=2026-12-01T23:59:00+01:00 docs/slurm-autograde.sh
#
# Array task K grades `--shard K/N` into $GRADING/out-K with as many jobs as CPUs it got.
# N is SHARDS (8, the --array line below: change both together). The array's highest task
# queues one merge job, which starts when every task of its array has ended (afterany) and
# merges out-1..out-N once all of them are complete.
#
# A task that failed (or was cancelled) is rerun on its own, and resumes: what it graded is
# kept, nothing is graded twice. Its shard is its task number, whatever the array's size:
#
#   sbatch --array=3 --export=ALL,DEADLINE=2026-12-01T23:59:00+01:00 docs/slurm-autograde.sh
#
# and that rerun queues the merge again. The merge of an incomplete class fails and names
# the shards to rerun. `--require-sandbox`: a node where bubblewrap cannot isolate the
# kernels (not installed, unprivileged user namespaces off) grades nothing, and the task
# fails saying why (docs/grading.md, "A grading image").
#SBATCH --job-name=autograde
#SBATCH --array=1-8                 # tasks 1..N, N = SHARDS
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --time=02:00:00
#SBATCH --output=autograde-%A_%a.log
# For GPU grading: #SBATCH --gres=gpu:1
set -euo pipefail

GRADING=${GRADING:-$PWD/grading}          # holds submitted/ (or a zip) on a shared filesystem
COURSE=${COURSE:-$PWD}                    # this repository, with .venv installed
SHARDS=${SHARDS:-8}                       # N: the class is cut into this many shards
source "$COURSE/.venv/bin/activate"

if [[ "${1:-}" == "merge" ]]; then
    outs=()
    for k in $(seq 1 "$SHARDS"); do outs+=("$GRADING/out-$k"); done
    if ! python -m grader merge "${outs[@]}" --out "$GRADING/graded"; then
        echo "The merge waits for every shard: rerun the shards named above, each on its own" \
             "(sbatch --array=K $COURSE/docs/slurm-autograde.sh, same SHARDS); the rerun" \
             "merges again." >&2
        exit 1
    fi
    exit
fi

K=${SLURM_ARRAY_TASK_ID:?submit this script with sbatch (an array task K grades shard K)}
if (( K < 1 || K > SHARDS )); then
    echo "Array task $K is outside the shards 1..$SHARDS: change SHARDS with --array." >&2
    exit 2
fi

# The array's highest task queues the merge at its start, so a cancelled task still ends in
# a merge (which then names what to rerun). Run outside SLURM (one machine), it queues none.
if [[ "$K" == "${SLURM_ARRAY_TASK_MAX:-}" ]]; then
    sbatch --dependency="afterany:$SLURM_ARRAY_JOB_ID" --job-name=autograde-merge \
        --cpus-per-task=1 --mem=2G --time=00:20:00 --output="autograde-merge-%j.log" \
        --export=ALL,COURSE="$COURSE",GRADING="$GRADING",SHARDS="$SHARDS" \
        --wrap "bash $COURSE/docs/slurm-autograde.sh merge"
fi

python -m grader autograde "$GRADING/submitted" \
    --out "$GRADING/out-$K" --shard "$K/$SHARDS" \
    --jobs "${SLURM_CPUS_PER_TASK:-1}" --timeout 60 --memory-mb 3500 --require-sandbox \
    ${DEADLINE:+--deadline "$DEADLINE"} --quiet
