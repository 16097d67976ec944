# The grading image of docs/k8s-autograde-job.yaml: `course-grader` with the course installed
# read-only, run as a non-root user, with bubblewrap for the autograder's filesystem sandbox.
#
#   docker build -t registry.example.org/transformer-course/grader:2026.1 .
#   docker build --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 -t ...:2026.1-gpu .
#
#   docker run --rm -v "$PWD/grading:/grading" \
#       --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#       --security-opt systempaths=unconfined \
#       registry.example.org/transformer-course/grader:2026.1 \
#       autograde /grading/submitted --out /grading/out --quiet
#
# What the sandbox needs from the container (docs/grading.md, "A grading image"): bubblewrap
# makes every kernel an unprivileged user namespace with its own mount, PID and network
# namespaces and a fresh /proc. Container runtimes forbid that by default: allow the
# unshare/clone calls (seccomp), do not confine user namespaces (AppArmor), and leave /proc
# unmasked, as the three --security-opt above do (Kubernetes: see the YAML). Check it with
#   docker run --rm [those options] --entrypoint bwrap IMAGE --unshare-all --die-with-parent \
#       --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp true && echo sandbox works
# The base: any Debian bookworm with Python 3.11 (python3, python3-venv). The default is the
# public image; without a registry, `make image-check` imports a root filesystem made by
#   debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm ROOTFS
# and passes it as --build-arg BASE_IMAGE=localhost/course-debian:bookworm.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# bubblewrap: the kernels' sandbox; tini: PID 1 that reaps the kernels' orphans.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap tini \
    && rm -rf /var/lib/apt/lists/*

# Python and every package outside any home directory, owned by root: the grading user (and
# the user kernels may be dropped to) can run them and change none of them.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# pip's own settings for the build (a mirror, local wheels), from a file the build mounts:
# make image-check passes this machine's pip configuration this way. Unset: pip's defaults.
ARG PIP_CONFIG_FILE
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/venv
COPY requirements.txt /opt/course/requirements.txt
# torch first, from the index that matches the hardware (CPU by default), at the pinned version.
RUN pip install --index-url "$TORCH_INDEX" "$(grep -E '^torch==' /opt/course/requirements.txt)" \
    && pip install -r /opt/course/requirements.txt

# The course: sources, helpers, grader, nbgrader configuration. Read-only for everyone but root.
COPY . /opt/course
RUN pip install --no-deps -e /opt/course \
    && python -m compileall -q /opt/course/grader /opt/course/course \
    && chmod -R a+rX,go-w /opt/course /opt/venv

RUN useradd --uid 1000 --user-group --no-create-home --home-dir /tmp --shell /usr/sbin/nologin grader
# The root filesystem may be read-only (Kubernetes: readOnlyRootFilesystem): everything the
# grader writes goes to --out (the /grading volume) and to /tmp (scratch, HOME, caches).
ENV COURSE_ROOT=/opt/course \
    HOME=/tmp \
    TMPDIR=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
USER 1000:1000
WORKDIR /grading
ENTRYPOINT ["/usr/bin/tini", "--", "course-grader"]
CMD ["--help"]
