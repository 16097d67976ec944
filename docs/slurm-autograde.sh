#!/bin/bash
# Grade a class on a SLURM cluster: an array of N shards, then one merge job.
#
#   sbatch --export=ALL,DEADLINE=2026-12-01T23:59:00+01:00 docs/slurm-autograde.sh
#
# Each array task grades `--shard K/N` into $GRADING/out-K with as many jobs as CPUs it got;
# the merge job starts when all tasks succeeded (afterok). Rerunning a failed task resumes it.
# The kernels' sandbox needs bubblewrap on the nodes and unprivileged user namespaces
# (docs/grading.md, "A grading image").
#SBATCH --job-name=autograde
#SBATCH --array=1-8                 # N = 8 shards
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --time=02:00:00
#SBATCH --output=autograde-%A_%a.log
# For GPU grading: #SBATCH --gres=gpu:1
set -euo pipefail

GRADING=${GRADING:-$PWD/grading}          # holds submitted/ (or a zip) on a shared filesystem
COURSE=${COURSE:-$PWD}                    # this repository, with .venv installed
N=${SLURM_ARRAY_TASK_COUNT:-8}
source "$COURSE/.venv/bin/activate"

if [[ "${1:-}" == "merge" ]]; then
    python -m grader merge "$GRADING"/out-* --out "$GRADING/graded"
    exit
fi

python -m grader autograde "$GRADING/submitted" \
    --out "$GRADING/out-$SLURM_ARRAY_TASK_ID" --shard "$SLURM_ARRAY_TASK_ID/$N" \
    --jobs "${SLURM_CPUS_PER_TASK:-1}" --timeout 60 --memory-mb 3500 \
    ${DEADLINE:+--deadline "$DEADLINE"} --quiet

# The last task to start queues the merge, to run once every task has succeeded.
if [[ "$SLURM_ARRAY_TASK_ID" == "$SLURM_ARRAY_TASK_MAX" ]]; then
    sbatch --dependency="afterok:$SLURM_ARRAY_JOB_ID" --job-name=autograde-merge \
        --cpus-per-task=1 --mem=2G --time=00:20:00 \
        --wrap "COURSE=$COURSE GRADING=$GRADING bash $COURSE/docs/slurm-autograde.sh merge"
fi
