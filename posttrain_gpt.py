"""MindSpeed-LLM's name for ``posttrain.py``: the same program (see its docstring for a command line)."""
from __future__ import annotations

from posttrain import main

if __name__ == "__main__":
    main()
