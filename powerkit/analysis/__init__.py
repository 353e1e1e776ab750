"""Analyses over canonical traces: functions that take data and return dataclasses."""
