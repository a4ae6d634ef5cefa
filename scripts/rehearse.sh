#!/usr/bin/env bash
# The main job on a local rehearsal node (no Chameleon account needed):
#   1. bootstrap: system packages + .venv
#   2. provision: a rehearsal node (podman + systemd + sshd), inventory/hosts.yml + known_hosts
#      (images built once per recipe hash and cached in ~/.cache/serve-system)
#   3. configure: playbooks/site.yml (docker, nvidia toolkit - skipped without GPU -, nvtop, serve stack)
#   4. show Triton serving the lab's models on the node
#   5. run experiments/dynbatch.yml on it and print the dynamic-batching report
# Environment: REHEARSE_COUNT (nodes, default 1), REHEARSE_PREFIX (node names, default the tool's own
# default node-serve-system-$USER, the same for both providers).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\033[1m[rehearse]\033[0m %s\n' "$*" >&2; }

bash scripts/bootstrap.sh
COUNT="${REHEARSE_COUNT:-1}"
PREFIX="${REHEARSE_PREFIX:-node-serve-system-${USER:-$(id -un)}}"

log "provisioning ${COUNT} rehearsal node(s) named ${PREFIX}*"
.venv/bin/python chi_scripts/launch.py --provider local --count "$COUNT" --prefix "$PREFIX"

log "configuring with playbooks/site.yml"
.venv/bin/ansible-playbook -i inventory/hosts.yml playbooks/site.yml

log "Triton on every node (asked from its jupyter container over the compose network):"
.venv/bin/ansible serve_nodes -i inventory/hosts.yml -m ansible.builtin.command -b \
  -a "docker exec jupyter python3 -c \"import tritonclient.http as h; c=h.InferenceServerClient('triton_server:8000'); print('triton ready:', c.is_server_ready(), '| models:', [(m['name'], m.get('state')) for m in c.get_model_repository_index()])\""
RUN_ID="${REHEARSE_RUN_ID:-rehearsal-$(date -u +%Y%m%dT%H%M%S)}"
log "running experiments/dynbatch.yml (run id ${RUN_ID}): 2 variants x 3 load levels"
.venv/bin/ansible-playbook -i inventory/hosts.yml experiments/dynbatch.yml -e "run_id=${RUN_ID}"
REPORT="results/dynbatch/${RUN_ID}/report.md"
log "report: ${REPORT} (plots and summary.csv beside it)"
cat "${REPORT}"
log "done. Tear the node(s) down with: .venv/bin/python chi_scripts/teardown.py --provider local --prefix ${PREFIX}"
