"""The grading engine of "Serving under pressure: from admission to release"."""
__version__ = "0.1.0"
