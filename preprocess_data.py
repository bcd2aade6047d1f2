"""Entry point: ``python preprocess_data.py --input ... --output-prefix ...`` (see tools/preprocess_data.py)."""
import sys

from tools.preprocess_data import main

if __name__ == "__main__":
    sys.exit(main())
