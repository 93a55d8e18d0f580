import json
import os


def mutate(notebook, context):
    # Names as a Windows or an old archive tool writes them: Latin-1 bytes, not UTF-8.
    latin1 = lambda name: os.fsdecode(name.encode("latin-1"))
    return {latin1(f"Copie de {context['notebook_name']} été.ipynb"): json.dumps(notebook).encode(),
            latin1("café.py"): b"print('hello')\n",
            latin1("données/notes.txt"): b"my notes\n"}
