"""ncclcheck's version, in the lowest layer so that every report builder can name it without importing the package
root (whose lazy API attributes sit above everything)."""

__version__ = "0.1.0"
