#!/usr/bin/env bash
# CI fragment: install (if needed) and start the one-node SLURM cluster that
# the multi-process tests run `srun -n 2 ...` on. Called by .ci/run before
# pytest, either way:
#
#   bash .ci/slurm.sh          # then run pytest with PGLE_REQUIRE_SLURM=1
#   . .ci/slurm.sh             # sourced: also exports PGLE_REQUIRE_SLURM=1
#
# PGLE_REQUIRE_SLURM=1 turns the SLURM fixture's "skip" into a failure, so CI
# can never go green by skipping every multi-process test. A failure to
# install or start exits non-zero with slurm_up.sh's reason on stderr.
# tests/cluster/slurm_down.sh stops the cluster afterwards (optional in CI:
# the machine is thrown away).
_pgle_slurm_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_pgle_slurm_t0=$(date +%s)
if bash "$_pgle_slurm_root/tests/cluster/slurm_up.sh"; then
  echo "slurm.sh: one-node SLURM cluster ready in $(( $(date +%s) - _pgle_slurm_t0 ))s." >&2
  export PGLE_REQUIRE_SLURM=1
  (return 0 2>/dev/null) && return 0 || exit 0
else
  _pgle_slurm_rc=$?
  echo "slurm.sh: could not start the SLURM cluster (exit $_pgle_slurm_rc); see the lines above." >&2
  (return 0 2>/dev/null) && return "$_pgle_slurm_rc" || exit "$_pgle_slurm_rc"
fi
