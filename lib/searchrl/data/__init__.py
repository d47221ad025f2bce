"""Questions and corpora: the synthetic world and loaders for real QA data."""
from searchrl.data.schema import Doc, QARow, make_row

__all__ = ["Doc", "QARow", "make_row"]
