import os


def place(folder, context):
    os.mkfifo(folder / "answers.ipynb")
