#!/usr/bin/env bash
# The demo behind `make demo`: record a simulated GRPO job, inspect it, import an
# nvidia-smi log, judge windows and a fleet, price it, plan a pilot, sweep the knobs, find
# which jobs to cap first (PFI), and write an HTML report. Outputs go to demo_out/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pk="${POWERKIT:-$root/.venv/bin/powerkit}"
out="$root/demo_out"
rm -rf "$out"
mkdir -p "$out"
cd "$root"

# The demo's pages share one copy of Plotly's JavaScript (each page would inline 4.8 MB).
js="$out/plotly.min.js"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "record: 10 minutes of a simulated 7B GRPO job on one A100, sampled every 0.5 s"
"$pk" record --backend sim --preset a100-7b --duration 10m --interval 0.5s --out "$out/7b.parquet"

step "info: what is in it"
"$pk" info "$out/7b.parquet"

step "info on a sample trace: 72B GRPO, tensor parallel over 4 GPUs (sample_data/)"
"$pk" info sample_data/a100-72b-tp4.parquet

step "import: an nvidia-smi log without an index column, local times, a truncated last line"
"$pk" import sample_data/nvidia-smi-a100-14b.csv --tz America/Chicago --host node1 \
  --out "$out/imported.parquet"
"$pk" info "$out/imported.parquet"

step "windows: how often the 72B job exceeds 237.5 W per GPU at 0.5 s, 30 s and 5 min"
"$pk" windows sample_data/a100-72b-tp4.parquet --budget 237.5W --windows 0.5s,30s,5m

step "windows: the 7B job against the 314.6 W budget, tumbling windows"
"$pk" windows "$out/7b.parquet" --budget 314.6W --windows 0.5s,30s,5m --mode tumbling

step "oversub: 2x72B-tp4 + 2x14B + 4x7B = 16 GPUs, random starts, 200 draws"
"$pk" oversub sample_data/a100-72b-tp4.parquet:2 sample_data/a100-14b.parquet:2 \
  sample_data/a100-7b.parquet:4 --windows 0.5s,30s,5m --compose random --draws 200 \
  --capacity 60% --margin 5% --html "$out/fleet.html" --plotly-js "$js" --json > "$out/fleet.json"
echo "wrote $out/fleet.json and $out/fleet.html"

step "econ: what that fleet's peak is worth for 4096 H100-class GPUs (assumptions sourced)"
"$pk" econ --oversub "$out/fleet.json" --gpus 4096 --gpu-tdp 700W --window 30s

step "carbon: the 10-minute 7B run at the 2023 world average intensity (bundled, sourced)"
"$pk" carbon --trace "$out/7b.parquet" --region world

step "carbon: the priced fleet's energy per year at the same average"
"$pk" econ --oversub "$out/fleet.json" --gpus 4096 --gpu-tdp 700W --window 30s --json \
  > "$out/econ.json"
"$pk" carbon --econ "$out/econ.json" --region world

step "pilot: a plan to try it on 8 racks of a 20 MW site"
"$pk" pilot --oversub "$out/fleet.json" --site-mw 20 --out "$out/pilot.md"

step "sweep: which knob moves the 7B job's power (simulated, 2 x 2 settings)"
"$pk" sweep --preset a100-7b --group-size 4,16 --concurrency 2,8 --point 5m --warmup 30s \
  --out "$out/sweep.parquet"

step "pfi sweep: three simulated H200 training jobs under caps 200-700 W (2 repeats)"
for job in h200-dense-pretrain h200-moe-pretrain h200-moe-finetune; do
  "$pk" pfi sweep --preset "$job" --caps 200W,300W,400W,500W,600W,700W --point 5m \
    --warmup 1m --repeats 2 --out "$out/pfi-$job.parquet" 2>/dev/null
done

step "pfi compute: which job is cheapest to cap (PFI > 1: loses less speed than power)"
"$pk" pfi compute "$out"/pfi-*.parquet --curves-out "$out/curves.csv" --html "$out/pfi.html" \
  --plotly-js "$js"

step "pfi allocate: share a 0-40 % cut among 500 workloads of 100 such jobs"
"$pk" pfi allocate --jobs "$out/curves.csv" --policies equal,pfi,oracle --workloads 500 \
  --jobs-per-workload 100 --seed 0 --html "$out/allocate.html" --plotly-js "$js"
"$pk" pfi allocate --jobs "$out/curves.csv" --policies equal,pfi,oracle --workloads 500 \
  --jobs-per-workload 100 --seed 0 --json > "$out/allocation.json" 2>/dev/null

step "report: one self-contained HTML page"
"$pk" windows sample_data/a100-72b-tp4.parquet --budget 237.5W --windows 0.5s,30s,5m --json \
  > "$out/windows.json"
"$pk" report --trace "$out/7b.parquet" --trace sample_data/a100-72b-tp4.parquet \
  --windows "$out/windows.json" --oversub "$out/fleet.json" --sweep "$out/sweep.parquet" \
  --pfi "$out/curves.csv" --allocation "$out/allocation.json" --econ "$out/econ.json" \
  --plotly-js "$js" --out "$out/report.html"
echo "open $out/report.html in a browser (its pages share $js)"
