"""The foundations every other package stands on: the error types (``errors``), the one unit
parser (``units``), the choices the commands share (``choices``), plain values for JSON
(``jsonable``), the one writer (``outputs``), bounded input reading (``inputs``), DuckDB
connections (``db``), typed result documents (``documents``) and declared tables
(``tables``). Nothing here imports another powerkit package."""
