#!/usr/bin/env bash
# The device check on a lent NVIDIA GPU machine, which has no network: powerkit's own
# dependencies travel as .devsite/ (site.tar.xz: polars, DuckDB, Plotly unpacked; whl/: Typer,
# Rich, pydantic, nvidia-ml-py), made on the developer's machine and ignored by git:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d W \
#     polars polars-runtime-32 duckdb plotly        # unzip each into S/, then
#   tar -cJf .devsite/site.tar.xz -C S .            # (xz: the wheels' 86 MB fit in 55)
#   pip download ... -d .devsite/whl typer rich pydantic pydantic_core annotated-types \
#     typing_extensions typing-inspection annotated-doc markdown-it-py nvidia-ml-py
# (the versions .venv has; the device's python3 is 3.12 with PyTorch, NumPy, SciPy, pyarrow).
#   1. bench/device_nvml.py: 60 s at 0.1 s under load, a cap step and a clock lock (journaled,
#      put back), clock-event reasons and limits;
#   2. `powerkit sweep --backend cmd`: a power-cap and SM-clock sweep of bench/device_load.py;
#   3. `powerkit record --backend nvml` at 20 ms for 30 s under load.
# Everything lands in $OUT (device_out by default).
set -u
OUT=${OUT:-device_out}
mkdir -p "$OUT" /tmp/site
tar -xJf .devsite/site.tar.xz -C /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .devsite/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 POWERKIT_STATE_DIR=/tmp/pkstate
pk() { python3 -m powerkit "$@"; }
if [ "${1:-}" = logs ]; then  # nvidia-smi's own logs of all three power fields, read back
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv
  nvidia-smi --version | head -3 > "$OUT/nvidia_smi_version.txt"
  F=timestamp,index,name,power.draw,power.draw.average,power.draw.instant,clocks.current.sm,enforced.power.limit,clocks_event_reasons.active
  python3 bench/device_load.py 40 > /tmp/load.json 2>&1 &
  sleep 2
  timeout 30 nvidia-smi -i 0 --query-gpu=$F --format=csv -lms 50 > "$OUT/smi_h200_3fields_50ms.csv" &
  timeout 15 nvidia-smi -i 0 --query-gpu=timestamp,index,power.draw.instant --format=csv -lms 5 > "$OUT/smi_h200_instant_5ms.csv" &
  wait
  cat /tmp/load.json
  for f in "$OUT"/smi_h200_*.csv; do
    b=$(basename "$f" .csv)
    pk info "$f" --explain > "$OUT/$b.explain.txt" 2>&1
    pk info "$f" --json > "$OUT/$b.info.json" 2> "$OUT/$b.info.err"
    pk info "$f" --power-field instant --json > "$OUT/$b.instant.json" 2>&1
  done
  ls -la "$OUT"; exit
fi
if [ "${1:-}" = nvml-only ]; then
  timeout 150 python3 bench/device_nvml.py --seconds 60 --interval 0.1 --out "$OUT" 2>&1 | tee "$OUT/device_nvml.log"
  pk restore 2>&1 | tail -3; exit
fi
nvidia-smi --query-gpu=name,driver_version,power.limit,power.default_limit,power.min_limit,power.max_limit,clocks.max.sm --format=csv
echo "== 1. device_nvml.py"
timeout 150 python3 bench/device_nvml.py --seconds 60 --interval 0.1 --out "$OUT" 2>&1 | tee "$OUT/device_nvml.log"
echo "== 2. sweep --backend cmd"
timeout 170 python3 -m powerkit sweep --backend cmd --run "python3 bench/device_load.py 60" \
  --power-cap 300W,450W,700W --gpu-frequency 1980,1200 --warmup 4s --point 8s --cooldown 2s \
  --interval 50ms --gpus 0 --out "$OUT/sweep.parquet" --json > "$OUT/sweep.json" 2> /tmp/sweep.err
echo "rc=$?"; tail -5 /tmp/sweep.err; head -c 3000 "$OUT/sweep.json"; echo
echo "== 3. record --backend nvml"
python3 bench/device_load.py 34 > /tmp/load.json 2>&1 &
sleep 4
timeout 60 python3 -m powerkit record --backend nvml --interval 20ms --duration 30s --gpus 0 \
  --out "$OUT/record_nvml.parquet" 2>&1 | tail -5
wait
cat /tmp/load.json
pk restore 2>&1 | tail -3
nvidia-smi --query-gpu=power.limit,clocks.sm --format=csv
ls -la "$OUT"
