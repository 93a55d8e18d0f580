import json


def mutate(notebook, context):
    bonus = {"cell_type": "code", "execution_count": None, "outputs": [], "source": "print('free points')",
             "metadata": {"nbgrader": {"grade": True, "grade_id": "bonus_points", "locked": True, "points": 50,
                                       "schema_version": 3, "solution": False, "task": False}}}
    no_id = {"cell_type": "code", "execution_count": None, "outputs": [], "source": "x = 1",
             "metadata": {"nbgrader": {"grade": True, "points": 5}}}
    garbage = {"cell_type": "markdown", "source": "notes", "metadata": {"nbgrader": "garbage"}}
    notebook["cells"] += [bonus, no_id, garbage]
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader")
        if isinstance(meta, dict) and meta.get("grade_id") == "test_scores":
            meta["schema_version"] = 99
    for cell in notebook["cells"]:
        cell.pop("id", None)
    notebook["nbformat_minor"] = 4
    return {f"{context['notebook_name']}.ipynb": json.dumps(notebook).encode()}
