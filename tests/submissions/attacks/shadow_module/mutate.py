import json

FAKE = b"def allclose(*args, **kwargs):\n    return True\n\nraise SystemExit('the shadow module was imported')\n"


def mutate(notebook, context):
    return {f"{context['notebook_name']}.ipynb": json.dumps(notebook).encode(),
            "torch.py": FAKE, "numpy/__init__.py": FAKE, "math.py": FAKE}
