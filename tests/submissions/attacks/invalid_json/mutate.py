import json


def mutate(notebook, context):
    text = json.dumps(notebook)
    return {f"{context['notebook_name']}.ipynb": text[: len(text) // 2].encode()}
