"""Save what ``trl sft`` needs to run offline: a tiny causal LM built from a config with its
tokenizer (``WORK_DIR/model``) and a tiny text dataset as a local JSON-lines file
(``WORK_DIR/data/train.jsonl``, which ``datasets.load_dataset(WORK_DIR/data)`` reads).

Usage: python trl_cli_setup.py WORK_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sft_run import tiny_model, tokenizer  # the model and tokenizer of the SFTTrainer test


def main() -> None:
    work = Path(sys.argv[1])
    tok = tokenizer()
    model = tiny_model(tok)
    model.save_pretrained(work / "model")
    tok.save_pretrained(work / "model")
    (work / "data").mkdir(parents=True)
    rows = [{"text": f"the cat sat on mat number {'abcdefgh'[i % 8]}."} for i in range(16)]
    (work / "data" / "train.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8"
    )
    print("RESULT " + json.dumps({"model": str(work / "model")}), flush=True)


if __name__ == "__main__":
    main()
