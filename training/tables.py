"""The model card's tables of candidate classes: one row per class, one column per view or fold
held out, and a last column (the mean, or the score the class is judged by)."""


def class_table(names, columns, cell, last, last_name, chosen=None, mark="", digits=3):
    """`cell(name, column)` and `last(name)` give the numbers; the chosen class is marked."""
    lines = ["| class | " + " | ".join(columns) + f" | {last_name} |", "|---|" + "---|" * (len(columns) + 1)]
    for name in names:
        tag = f" ({mark})" if name == chosen else ""
        lines.append(f"| {name}{tag} | " + " | ".join(f"{cell(name, c):.{digits}f}" for c in columns)
                     + f" | {last(name):.{digits}f} |")
    return lines
