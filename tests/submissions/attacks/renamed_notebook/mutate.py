import json


def mutate(notebook, context):
    return {f"Copy of {context['notebook_name']}.ipynb": json.dumps(notebook).encode()}
