"""Hidden checks, one package per section (``s10_1`` ...), one module per exercise.

``SECTIONS`` maps "10.1" to its package; ``EXERCISES`` finds any exercise by name.
"""

import importlib
import pkgutil
import re

_SECTION = re.compile(r"s(\d+)_(\d+)")
SECTIONS = {f"{m[1]}.{m[2]}": importlib.import_module(f"{__name__}.{m[0]}")
            for m in sorted((_SECTION.fullmatch(i.name) for i in pkgutil.iter_modules(__path__)
                             if _SECTION.fullmatch(i.name)), key=lambda m: (int(m[1]), int(m[2])))}

EXERCISES = {name: exercise for section in SECTIONS.values() for name, exercise in section.EXERCISES.items()}
