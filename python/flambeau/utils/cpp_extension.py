"""flambeau.utils.cpp_extension: where the stable C header of the installed package is,
for building extensions (as torch.utils.cpp_extension.include_paths)."""
import os

__all__ = ["include_paths"]


def include_paths():
    """The directories to put on the compiler's include path: ``#include
    "flambeau/stable/c_api.h"`` then finds the header of this flambeau."""
    return [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")]
