#!/usr/bin/env bash
# Regenerate every file in sample_data/ from the built-in simulator (seeded: same data every
# time). Run from anywhere: `make samples` or `bash sample_data/regenerate.sh`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
pk="${POWERKIT:-$root/.venv/bin/powerkit}"
py="${PYTHON:-$root/.venv/bin/python}"

for preset in a100-7b a100-14b a100-72b-tp4 h100-8b h200-70b-tp8; do
  "$pk" record --backend sim --preset "$preset" --duration 20m --interval 0.5s --seed 0 \
    --out "$here/$preset.parquet" --force --quiet
done
# The same simulated job as an nvidia-smi log would show it: 2 GPUs interleaved without an
# index column, units in the cells, host-local times, and a line cut short by a killed logger.
"$py" "$here/to_smi_csv.py" "$here/a100-14b.parquet" "$here/nvidia-smi-a100-14b.csv" \
  --minutes 5 --tz America/Chicago
# The same as a user's own logger writes it: read by its columns' names (docs/import.md).
"$py" "$here/to_logger_csv.py" "$here/a100-14b.parquet" "$here/logger-a100-14b.csv" --minutes 2
# A fleet of those jobs, as oversub judges it (the input of the econ, pilot and carbon pages'
# worked examples); run from the root so that the document names the members as shown there.
(cd "$root" && "$pk" oversub sample_data/a100-72b-tp4.parquet:2 sample_data/a100-14b.parquet:2 \
  sample_data/a100-7b.parquet:4 --compose random --draws 50 --capacity 60% --margin 5% --seed 0 \
  --json > "$here/fleet.json")
ls -l "$here"
