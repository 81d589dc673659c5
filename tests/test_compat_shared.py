"""v0_5_23.py takes what 0.5.23 keeps of 0.5.17 from v0_5_17.py by name and declares only what
differs: an imported name is 0.5.17's very object; a name it declares itself that 0.5.17 also has
must differ from 0.5.17's (else it is a copy that would drift); no star import, so a 0.5.17-only
contact (draft_tp's ParallelContext override, for instance) cannot slip into 0.5.23. No SGLang is
imported: the compat files only name SGLang's objects."""
import ast
import inspect

from sglang_patches.compat import v0_5_17, v0_5_23
from sglang_patches.compat.contacts import Contact

PREV = "sglang_patches.compat.v0_5_17"


def _imported_and_declared(module):
    tree = ast.parse(inspect.getsource(module))
    imported, star, declared = [], False, set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == PREV:
            star = star or any(a.name == "*" for a in node.names)
            imported += [a.asname or a.name for a in node.names]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            declared |= {t.id for t in targets if isinstance(t, ast.Name)}
    return imported, star, declared


def test_0523_imports_by_name_and_declares_only_what_differs():
    imported, star, declared = _imported_and_declared(v0_5_23)
    assert not star, "v0_5_23.py star-imports v0_5_17: name what it keeps"
    assert len(imported) == len(set(imported)), "a name is imported twice"
    assert not set(imported) & declared, set(imported) & declared  # imported, then overwritten
    kept = [n for n in imported if isinstance(getattr(v0_5_17, n), Contact)]
    assert len(kept) > 50  # the bulk of the file is shared (core, marker, checks, triton_draft, ...)
    for name in kept:
        assert getattr(v0_5_23, name) is getattr(v0_5_17, name), name
    copies = [n for n in sorted(declared) if isinstance(getattr(v0_5_23, n), Contact)
              and getattr(v0_5_17, n, None) == getattr(v0_5_23, n)]
    assert not copies, f"declared in v0_5_23.py exactly as in v0_5_17.py (import them instead): {copies}"


def test_0523_contacts_list_the_imported_ones_in_file_order():
    mine = v0_5_23.contacts()
    assert len(mine) == len({id(c) for c in mine})  # no contact bound twice
    imported, _, _ = _imported_and_declared(v0_5_23)
    shared = [c for c in mine if c in v0_5_17.contacts()]
    assert [getattr(v0_5_23, n) for n in imported if isinstance(getattr(v0_5_17, n), Contact)] == shared
    # what only 0.5.17 has stays out of 0.5.23
    assert not hasattr(v0_5_23, "PARALLEL_OVERRIDE") and not hasattr(v0_5_23, "DRAFT_WORKER_PS")
