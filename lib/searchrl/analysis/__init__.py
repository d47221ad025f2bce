"""Reading finished run folders: results over seeds, pooled intervals, learning checks, headroom and figures."""
