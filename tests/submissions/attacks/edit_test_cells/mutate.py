import json


def mutate(notebook, context):
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            cell["source"] = "pass"
    return {f"{context['notebook_name']}.ipynb": json.dumps(notebook).encode()}
