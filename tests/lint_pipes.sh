#!/usr/bin/env bash
# Under `set -o pipefail` a pipeline whose reader stops early (`head`, `grep -q`, `grep -m`,
# awk's `exit`, sed's `q`) fails with 141 when its writer still has output to write: the
# writer dies of SIGPIPE, and `set -e` ends the script without a word. Whether it happens
# depends on output length and timing, so it passes here and fails on another machine
# (it ended a CI run in tests/consumers/run.sh: `ldconfig -p | awk '... exit'`).
# This check lists such pipelines in every shell script of the project that sets pipefail.
# Usage: tests/lint_pipes.sh   (exit 1 if any is found)
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
while IFS= read -r f; do
    grep -q 'pipefail' "$f" || continue
    # A pipe (not ||) followed by an early-stopping reader, on a line that is not a comment.
    if hits=$(grep -nE '^[^#]*[^|]\|[[:space:]]*(head|grep[[:space:]]+(-[a-zA-Z]*[qm]|--quiet|--max-count)|awk[^|]*[^a-z_]exit[^a-z_]|sed[^|]*[0-9/]q)' "$f"); then
        sed "s|^|$f:|" <<<"$hits"
        bad=1
    fi
done < <(find .ci tests bench tournament bindings examples -type f \
    \( -name '*.sh' -o -path '.ci/*' \) ! -path '*/build*' | sort)
[ "$bad" -eq 0 ] || { echo "lint_pipes: readers that stop early under pipefail (above)" >&2; exit 1; }
echo "lint_pipes: no early-stopping reader in a pipefail script"
