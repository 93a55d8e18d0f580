import nbformat


def mutate(notebook, context):
    old = nbformat.convert(nbformat.from_dict(notebook), 3)
    return {f"{context['notebook_name']}.ipynb": nbformat.writes(old, version=3).encode()}
