import json


def mutate(notebook, context):
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            meta["points"] = 100
    return {f"{context['notebook_name']}.ipynb": json.dumps(notebook).encode()}
