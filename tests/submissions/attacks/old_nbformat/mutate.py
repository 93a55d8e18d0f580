import json

import nbformat


def mutate(notebook, context):
    # nbformat.reads joins multi-line sources (stored as lists on disk), as the v3 converter expects.
    current = nbformat.reads(json.dumps(notebook), as_version=4)
    old = nbformat.convert(current, 3)
    return {f"{context['notebook_name']}.ipynb": nbformat.writes(old, version=3).encode()}
