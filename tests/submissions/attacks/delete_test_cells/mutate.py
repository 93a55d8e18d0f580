import json


def mutate(notebook, context):
    notebook["cells"] = [cell for cell in notebook["cells"]
                         if not (cell.get("metadata", {}).get("nbgrader", {}).get("grade")
                                 and not cell["metadata"]["nbgrader"].get("solution"))]
    return {f"{context['notebook_name']}.ipynb": json.dumps(notebook).encode()}
