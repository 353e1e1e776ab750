"""One module per source a trace is read from: nvidia-smi CSV and its text logs (``smi``,
``textlog``), ``nvidia-smi dmon`` (``dmon``), the DCGM exporter (``dcgm``), amd-smi
(``amdsmi``), any CSV by its columns (``csvfile``) and a Prometheus server (``prometheus``).
Each returns canonical columns; ``powerkit.trace.reader`` picks one by the file."""
